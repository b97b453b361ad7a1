"""Test-wide settings: property tests never fail on wall-clock time (CI shares two cores)."""

from hypothesis import settings

settings.register_profile("openjev", deadline=None)
settings.load_profile("openjev")
