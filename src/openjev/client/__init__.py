"""Client-side helpers shared by the commands that talk to a running server (`eval`, `smoke`)."""
