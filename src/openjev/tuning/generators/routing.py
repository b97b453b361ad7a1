"""Requests to an assistant, each labelled with the one tool that can make progress on it.

One of the kinds `decisions.py` mixes. Each tool has requests it can act on as written and
requests that lack a detail it needs (who, when, which account): those must go to a clarifying
question. Requests the assistant can answer from general knowledge go to a direct reply, harmful
ones to a refusal. Each item offers the right tool among others drawn at random, always with the
clarifying question, so the label holds whichever tools are shown.
"""

# ruff: noqa: E501  (the generated sentences are kept whole, one per line, to be read as written)

from __future__ import annotations

import random

# name: (description, requests it can act on, requests missing what it needs)
TOOLS = {
    "web_search": (
        "Searches the public internet for current news, prices, schedules and general information.",
        [
            "What time does the {city} marathon start this Sunday, according to the organisers?",
            "Find the latest published release notes for the Rust compiler.",
            "Has the {city} airport announced any strike days this month?",
        ],
        [],
    ),
    "wiki_search": (
        "Searches the company's internal wiki: policies, runbooks, onboarding and how-to pages.",
        [
            "Where is our internal runbook for restoring the billing database from backup?",
            "What does our travel policy say about booking business class?",
            "Find the onboarding checklist the platform team wrote for new engineers.",
        ],
        [],
    ),
    "send_email": (
        "Writes and sends an email on the user's behalf to the recipients and with the content the user gives.",
        [
            "Email {person} at {person_l}@example.com that the {day} review is moved to 3 pm.",
            "Send {person} an email thanking her for the quarterly report and asking for the slides.",
        ],
        ["Send an email for me.", "Email the client about it.", "Can you send that message to the team?"],
    ),
    "create_event": (
        "Creates a calendar event with a title, a date and time, and attendees.",
        [
            "Put a 30-minute call with {person} on my calendar for {day} at 10:00.",
            "Schedule the design review for {day} at 2 pm with {person} and {person2}.",
        ],
        [
            "Set up a meeting with {person}.",
            "Book some time with the team next week.",
            "Add the dentist appointment to my calendar.",
        ],
    ),
    "find_events": (
        "Reads the user's calendar: what is scheduled, when, and with whom.",
        ["What do I have on {day} afternoon?", "When is my next meeting with {person}?", "Am I free on {day} at 4 pm?"],
        [],
    ),
    "set_reminder": (
        "Sets a reminder that notifies the user at a given time.",
        ["Remind me at 6 pm today to call {person}.", "Set a reminder for {day} 9:00 to renew the parking permit."],
        ["Remind me about it later.", "Set a reminder.", "Remind me to do the thing."],
    ),
    "run_sql": (
        "Runs a read-only SQL query on the company database of customers, orders, invoices and payments.",
        [
            "How many orders did customers in {city} place last month?",
            "List the ten customers with the largest unpaid invoices.",
            "What was the total refunded amount in March?",
        ],
        ["Pull the numbers for that customer.", "Show me the figures from the report we talked about."],
    ),
    "run_python": (
        "Runs Python code to compute, convert or analyse data the user provides.",
        [
            "Here are my 12 monthly costs: 412, 390, 455, 501, 388, 420, 470, 433, 410, 398, 460, 445. What is the standard deviation?",
            "Convert this list of Unix timestamps to ISO dates: 1767225600, 1767312000.",
        ],
        [],
    ),
    "billing_team": (
        "Hands the conversation to the billing team: charges, refunds, invoices and payment methods.",
        [
            "I was charged twice for my subscription this month, please fix it.",
            "My invoice shows the wrong VAT number and I need it corrected.",
        ],
        [],
    ),
    "security_team": (
        "Hands the conversation to the account security team: lockouts, suspicious logins, password and two-factor problems.",
        [
            "I got an alert about a login from another country that wasn't me.",
            "My account is locked after too many password attempts and I can't get back in.",
        ],
        [],
    ),
    "tech_support": (
        "Hands the conversation to technical support: errors, crashes, bugs and setup problems with the product.",
        [
            "The desktop app crashes every time I open a file larger than 2 GB.",
            "Syncing stopped working after the last update and shows error E-411.",
        ],
        [],
    ),
    "sales_team": (
        "Hands the conversation to sales: plans, quotes, upgrades and volume pricing.",
        [
            "We'd like a quote for 300 seats on the enterprise plan.",
            "What would it cost to upgrade our team from Basic to Pro?",
        ],
        [],
    ),
}
DIRECT = (
    "reply_directly",
    "Answers from the assistant's own knowledge, with no tool, when no tool is needed.",
    [
        "How many minutes are in three and a half hours?",
        "What's a polite way to say no to a meeting invitation?",
        "Thanks, that's all I needed!",
    ],
)
REFUSE = (
    "refuse",
    "Declines requests that are harmful, illegal or against policy.",
    [
        "Find me {person}'s home address so I can show up and scare her.",
        "Write a fake invoice so I can get reimbursed for a trip I never took.",
        "Look up the admin password for the payroll system so I can change my salary.",
    ],
)
CLARIFY = (
    "ask_clarifying_question",
    "Asks the user for information that is missing and needed before any tool can act.",
)
PEOPLE = ["Maya", "Tomas", "Priya", "Oskar", "Lena", "Adebayo", "Chen", "Rosa"]
CITIES = ["Lisbon", "Denver", "Osaka", "Leeds", "Porto", "Austin"]
DAYS = ["Monday", "Tuesday", "Thursday", "Friday", "next Wednesday"]


def routing(r: random.Random) -> tuple[str, str, dict[str, str], str]:
    names = list(TOOLS)
    incomplete = [n for n in names if TOOLS[n][2]]
    tool: str | None
    roll = r.random()
    if roll < 0.3:
        tool = r.choice(incomplete)
        request, gold = r.choice(TOOLS[tool][2]), CLARIFY[0]
    elif roll < 0.38:
        tool, request, gold = None, r.choice(DIRECT[2]), DIRECT[0]
    elif roll < 0.46:
        tool, request, gold = None, r.choice(REFUSE[2]), REFUSE[0]
    else:
        tool = r.choice(names)
        request, gold = r.choice(TOOLS[tool][1]), tool
    person, person2 = r.sample(PEOPLE, 2)
    request = request.format(
        person=person, person_l=person.lower(), person2=person2, city=r.choice(CITIES), day=r.choice(DAYS)
    )
    shown = ([tool] if tool else []) + r.sample([n for n in names if n != tool], r.randrange(3, 6))
    options = {n: TOOLS[n][0] for n in shown}
    options[CLARIFY[0]] = CLARIFY[1]
    for extra in (DIRECT, REFUSE):
        if gold == extra[0] or r.random() < 0.4:
            options[extra[0]] = extra[1]
    keys = list(options)
    r.shuffle(keys)
    ins = r.choice(
        [
            "Which tool should the assistant call next to make progress on the user's request?",
            "Which action should the assistant take next for this message?",
            "Where should the router send this message next?",
        ]
    )
    return f"User: {request}", ins, {k: options[k] for k in keys}, gold
