"""Labelled tickets whose priority follows a rule the packaged model was never told: a set to tune on.

The rule: the issue's base urgency (a question or cosmetic defect 0, something broken with a
workaround 1, an outage, lost data or a failed payment 2), plus one when the customer is angry, plus
one on the Premium plan, capped at 3; the levels are Low, Normal, High and Critical. Tickets are
drawn from phrase lists (issues, moods, plans, names) and the label is computed from what was
drawn, so every label is right by construction. `--policy-in-question` writes the rule into the
question's instructions; without it the question only asks for the priority, and the labels alone
teach the rule. Each phrase list is split in two: training sets draw from one half, `--held-out`
sets from the other, so a measuring set shares no issue text, mood line or name with training.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping

ISSUES = {
    0: [
        "How do I change the currency shown on my invoices?",
        "The export button label says 'Exprot' instead of 'Export'.",
        "Could you add a dark mode to the dashboard?",
        "Where can I find last year's receipts?",
        "The logo on the settings page looks slightly blurry.",
        "Is there a way to rename a project after creating it?",
        "Can I get the monthly report as a PDF instead of CSV?",
        "The tooltip on the pricing page overlaps the text a little.",
        "Is it possible to export our contacts to a spreadsheet?",
        "The footer still shows last year's copyright date.",
        "Could the weekly summary email come on Mondays instead of Fridays?",
        "How many users can we add on our current plan?",
        "The help article about webhooks has a broken link at the bottom.",
        "Would you consider adding keyboard shortcuts to the editor?",
        "The icons in the sidebar are not aligned with the labels.",
        "What is the difference between an admin and an owner role?",
    ],
    1: [
        "Search results take about ten seconds to load, but they do appear eventually.",
        "CSV imports fail for files over 5 MB; splitting the file works for now.",
        "Email notifications arrive a few hours late.",
        "The mobile app crashes when I rotate the screen; it works if I keep it upright.",
        "Two-factor codes sometimes fail the first time but work on a retry.",
        "The calendar sync skips recurring events; I add them by hand for now.",
        "Charts on the analytics page do not render in Firefox, Chrome works.",
        "Bulk edit only applies to the first 50 rows; I repeat it for the rest.",
        "The PDF export cuts off the last column, so I copy it into a spreadsheet instead.",
        "Password reset emails go to spam; I found them there after a while.",
        "Uploading a profile picture fails in Safari, it works from my phone.",
        "The dashboard freezes for a minute after login, then it works normally.",
        "Filters reset every time I open a report, so I set them again each time.",
        "Scheduled reports sometimes send twice; we just ignore the second one.",
        "The search ignores accented letters, so I search without them for now.",
        "Invoices show the wrong time zone, but the dates themselves are right.",
    ],
    2: [
        "Nobody on our team can log in since this morning; the login page returns an error.",
        "Our payment to renew the subscription failed and the account is now locked.",
        "All of the documents in our shared folder disappeared overnight.",
        "The API returns 500 for every request, our integration is completely down.",
        "Customers are being charged twice for every order since the last update.",
        "Our whole workspace shows as empty, every project is gone.",
        "Checkout is broken: no customer can pay on our store right now.",
        "Data we saved yesterday has been overwritten with blank values.",
        "Our production site has been unreachable for an hour and we are losing sales.",
        "Every customer's card is declined at checkout since your update this morning.",
        "A sync error deleted three months of our customer records.",
        "No emails at all are going out from our account, including order confirmations.",
        "The mobile app will not open for any of our users; it crashes on launch.",
        "Our database backup is gone and the restore button returns an error.",
        "Payroll payments to our staff failed and nobody has been paid.",
        "Every file we upload comes back corrupted and cannot be opened.",
    ],
}
CALM = [
    "Thanks in advance for looking into it.",
    "No rush, whenever you get a chance.",
    "Appreciate your help as always.",
    "Let me know if you need more details.",
    "Thank you!",
    "Kind regards.",
    "Have a great day.",
    "Cheers, and thanks for the great product.",
    "Whenever it suits you is fine.",
    "Many thanks for your patience with me.",
    "Hope you are having a good week.",
    "Thanks so much, you are always helpful.",
]
ANGRY = [
    "This is completely unacceptable and I am furious.",
    "I am extremely angry, this keeps happening and nobody fixes it!",
    "Honestly this is ridiculous. Fix it NOW.",
    "I'm fed up with your service, this is the last straw!!",
    "Are you kidding me? I am livid about this.",
    "Your product is a joke and I'm sick of it.",
    "I have wasted my whole day on this and I am beyond frustrated!",
    "This is the third time I write and I am seriously angry now.",
    "What a disgrace. I expected so much better from you.",
    "I am absolutely fuming, sort this out immediately!",
    "Unbelievable. I am so annoyed I could scream.",
    "I'm losing my patience with you people, this is outrageous!",
]
PLANS = {False: ["Free", "Starter", "Team"], True: ["Premium"]}
NAMES = [
    "Ana", "Ben", "Chloe", "Dmitri", "Eun-ji", "Farid", "Grace", "Hugo", "Ines", "Jonas", "Keiko", "Liam",
    "Maya", "Noah", "Olga", "Pedro", "Quinn", "Rosa", "Sami", "Tomas", "Uma", "Viktor", "Wen", "Yara",
]  # fmt: skip
LEVELS = ["Low", "Normal", "High", "Critical"]
POLICY = (
    "Priority policy: start from the issue's base urgency (Low for questions, requests and cosmetic defects; "
    "Normal when something is broken but a workaround exists; High for an outage, lost data or failed payments). "
    "Raise it one level when the customer is angry, and one level when the customer is on the Premium plan. "
    "Critical is the highest level."
)


def half(items: list[str], held_out: bool) -> list[str]:
    """Every other phrase: the first half trains, the second measures."""
    return items[int(held_out) :: 2]


def level(base: int, angry: bool, premium: bool) -> int:
    """The rule's priority, 0 (Low) to 3 (Critical)."""
    return min(3, base + angry + premium)


def ticket(rnd: random.Random, index: int, in_question: bool, seed: int, held_out: bool) -> dict[str, object]:
    base = rnd.choice([0, 1, 2])
    angry = rnd.random() < 0.5
    premium = rnd.random() < 0.4
    plan = rnd.choice(PLANS[premium])
    name = rnd.choice(half(NAMES, held_out))
    mood = rnd.choice(half(ANGRY if angry else CALM, held_out))
    issue = rnd.choice(half(ISSUES[base], held_out))
    state = f"From: {name} (plan: {plan})\nSubject: support request\n\n{issue} {mood}"
    instructions = "What priority should this ticket get?"
    if in_question:
        instructions = f"{POLICY} What priority should this ticket get?"
    return {
        "id": f"priority-{seed}-{index}",
        "dataset": "priority_rule",
        "state": state,
        "question": {"type": "score", "instructions": instructions, "criteria": LEVELS},
        "gold": level(base, angry, premium),
    }


def generate(count: int, seed: int, options: Mapping[str, bool]) -> Iterator[dict[str, object]]:
    """`count` tickets, one random stream from `seed` (what `openjev generate priority` writes)."""
    rnd = random.Random(seed)
    for index in range(count):
        yield ticket(rnd, index, options["policy-in-question"], seed, options["held-out"])
