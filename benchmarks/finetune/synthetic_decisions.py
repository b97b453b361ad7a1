"""Synthetic decisions that apply a written rule to a case, each labelled by the rule itself.

    python synthetic_decisions.py N SEED OUT.jsonl [--contrast]

Six kinds (return requests under a shop's policy, claims against evidence, an agent's proposed
action under an action policy, forum posts under moderation rules, bug-report severity, requests
routed to an assistant's tools), written in `openjev eval`'s item format; returns and routing come
from `synthetic_returns.py` and `synthetic_routing.py`. Names, goods, windows, dates (three
formats), rules, option sets and phrasings are drawn at random; the gold answer is computed from
what was drawn, so it is right by construction. The texts are these files' own: no item of any
dev set is copied. Output is a function of N and SEED only.
"""

# ruff: noqa: E501  (the generated sentences are kept whole, one per line, to be read as written)

import json
import random
import sys

import return_policies
import synthetic_returns
import synthetic_routing

R = random.Random(int(sys.argv[2]))


def pick(xs):
    return R.choice(xs)


def name():
    return return_policies.name(R)


def returns():
    return synthetic_returns.returns(R)


def returns_contrast():
    return synthetic_returns.returns_contrast(R)


def routing():
    return synthetic_routing.routing(R)


# ---------------- claims
FACTS = [
    ("notice period", "{v} days' written notice is required to terminate", [30, 45, 60, 90], "days' notice"),
    ("monthly fee", "the monthly fee is ${v}", [900, 1200, 2500, 3200, 4800], "dollars a month"),
    ("term", "the contract runs for {v} months", [12, 18, 24, 36], "months"),
    ("reimbursement cap", "meals are reimbursed up to ${v} per day", [40, 55, 75, 90], "dollars a day"),
    ("leave", "employees receive {v} days of paid leave per year", [15, 20, 25, 30], "leave days"),
    ("warranty", "the warranty covers parts for {v} years", [1, 2, 3, 5], "years"),
    ("response time", "critical incidents get a first response within {v} minutes", [15, 30, 60], "minutes"),
    ("capacity", "the venue holds at most {v} guests", [80, 120, 200, 350], "guests"),
]
CLAIM = {
    "supported": "The evidence says this, or it follows plainly from what it says.",
    "contradicted": "The evidence says something that cannot be true together with the claim.",
    "not_enough_info": "The evidence does not say enough to confirm or refute the claim.",
}
CLAIMT = {
    "notice period": "Either party can end the agreement with {v} days' written notice.",
    "monthly fee": "The service costs ${v} each month.",
    "term": "The agreement lasts {v} months.",
    "reimbursement cap": "Staff can claim up to ${v} a day for meals.",
    "leave": "Staff get {v} paid days off each year.",
    "warranty": "Parts are under warranty for {v} years.",
    "response time": "A critical incident is answered within {v} minutes.",
    "capacity": "Up to {v} guests can attend an event there.",
}


def claims():
    ent = (
        pick(
            [
                "Vendor contract",
                "Employee handbook",
                "Service agreement",
                "Expense policy",
                "Venue booking terms",
                "Product sheet",
            ]
        )
        + ", "
        + name()
    )
    fs = R.sample(FACTS, 3)
    shown = fs[:2]
    absent = fs[2]
    vals = {f[0]: pick(f[2]) for f in fs}
    ev = f"Evidence: {ent}: " + "; ".join(f[1].format(v=vals[f[0]]) for f in shown) + "."
    r = R.random()
    if r < 0.34:
        gold = "supported"
        f = pick(shown)
        v = vals[f[0]]
    elif r < 0.67:
        gold = "contradicted"
        f = pick(shown)
        v = pick([x for x in f[2] if x != vals[f[0]]])
    else:
        gold = "not_enough_info"
        f = absent
        v = vals[f[0]]
    return (
        ev + "\nClaim: " + CLAIMT[f[0]].format(v=v),
        pick(
            [
                "Based only on the evidence, what is the status of the claim?",
                "Judged only against the evidence, is the claim supported?",
            ]
        ),
        dict(CLAIM),
        gold,
    )


# ---------------- action review
ACT = [
    ("read", "`SELECT count(*) FROM orders` (read-only)", "GET the list of open invoices", "run the test suite"),
    (
        "write",
        "UPDATE one customer's shipping address",
        "PATCH the billing email on an account",
        "restart one web worker",
    ),
    (
        "destroy",
        "DROP TABLE sessions",
        "`rm -rf /var/data/uploads`",
        "force-push over the main branch",
        "delete the storage bucket with all backups",
    ),
    ("pay", "issue a $240 refund to the customer's card", "send a $1,800 payment to a supplier"),
    ("email_ext", "email the quote to a client at an outside address"),
    ("email_int", "post a summary to the internal team channel"),
]
ACTO = {
    "auto_approve": "Let it run without asking: it only reads, only touches non-production environments (local, dev, staging, test), or only messages people inside the company.",
    "require_human_review": "Pause it until a person approves: it changes production systems or data without destroying anything, moves real money, or contacts someone outside the company.",
    "block": "Do not allow it at all: it would destroy or irreversibly overwrite production data, storage or branches.",
}


def action():
    kind, *acts = pick(ACT)
    a = pick(acts)
    env = pick(["production", "production", "staging", "a local dev database", "the test environment"])
    prod = env == "production"
    if kind == "read" or kind == "email_int" or (not prod and kind in ("write", "destroy")):
        gold = "auto_approve"
    elif kind == "destroy":
        gold = "block"
    else:
        gold = "require_human_review"
    envs = "" if kind in ("pay", "email_ext", "email_int") else f" Target: {env}."
    state = f"Agent: {name().lower()}-bot.{envs} Proposed action: {a}. Context: {pick(['a user asked for it in chat', 'part of a nightly maintenance job', 'requested in ticket #' + str(R.randrange(1000, 9999)), 'the agent decided this cleans up after a failed run'])}."
    return (
        state,
        pick(
            [
                "Under the agent action policy described in the options, how should this proposed action be handled?",
                "Following the action policy in the options, what should happen to this action?",
            ]
        ),
        dict(ACTO),
        gold,
    )


# ---------------- moderation
POSTS = {
    "spam": [
        "Huge sale on {p} this week only, 50% off! Visit {s} dot example now. Again: {s} dot example!!",
        "DM me for cheap {p}, best prices, link in bio, link in bio, link in bio",
        "Buy followers and {p} at {s} dot example, use code WIN20 today!",
    ],
    "harassment": [
        "@{u} you are a clueless idiot and everyone here knows it. Log off forever.",
        "@{u} keep posting and I'll find out where you live, watch yourself.",
        "Nobody wants you here @{u}, you pathetic loser.",
    ],
    "self_harm": [
        "I don't see the point anymore. I've been giving away my things and tonight I plan to end it.",
        "Honestly I'm done. I have the pills next to me and I'm going to take them all after this post.",
    ],
    "allow": [
        "Does anyone know a good way to keep {p} from rusting over winter?",
        "Haha @{u} your last build was so crooked, you absolute goof, see you Saturday!",
        "Reporting this: @{u} sent me 'you worthless idiot' in DMs, mods please look.",
        "Finished my first {p} project today, rough edges but I'm proud of it. Tips welcome!",
        "This thread made me laugh so hard, thanks all for the advice.",
    ],
}
MODO = {
    "remove_spam": "Take the post down as advertising or link spam.",
    "allow": "Keep the post: no rule is broken.",
    "escalate_self_harm": "Hand the post to the safety team: the author seems at risk of hurting themselves now.",
    "remove_harassment": "Take the post down for insulting or threatening a member.",
}


def moderation():
    cat = pick(list(POSTS))
    post = pick(POSTS[cat]).format(
        p=pick(["garden tools", "bike parts", "sourdough starters", "guitar strings", "watercolor brushes"]),
        s=name().lower(),
        u=name().lower(),
    )
    gold = {
        "spam": "remove_spam",
        "harassment": "remove_harassment",
        "self_harm": "escalate_self_harm",
        "allow": "allow",
    }[cat]
    forum = name() + " " + pick(["Forum", "Community", "Club board"])
    rules = [
        "personal attacks and threats against members are not allowed (joking between friends, and quoting abuse when reporting it, are fine)",
        "advertising and repeated promotional links are removed",
        "anyone who seems at immediate risk of harming themselves is referred to the safety team",
    ]
    R.shuffle(rules)
    ins = (
        f"The {forum} rules: "
        + "; ".join(rules)
        + ". "
        + pick(["What should the moderator do with this post?", "Which moderation action fits this post?"])
    )
    return post, ins, dict(MODO), gold


# ---------------- triage
TRI = {
    "critical": "Critical: a main feature is unavailable or damaging data for (nearly) everyone; respond now.",
    "major": "Major: an important feature is degraded or failing for some users, or users can work around it.",
    "minor": "Minor: a cosmetic or small defect, few users or internal systems only; not urgent.",
    "no_defect": "No defect: the product behaves as intended (user mistake, documented behaviour, or a request for something new).",
}


def triage():
    svc = pick(["checkout", "login", "payments API", "search", "file upload", "notifications", "reporting dashboard"])
    r = R.random()
    if r < 0.25:
        gold = "critical"
        t = pick(
            [
                f"Since the 09:10 deploy, {svc} returns HTTP 500 for every customer; nobody can complete it.",
                f"The {svc} service has been writing corrupted records for all accounts since last night's release; thousands affected and rising.",
            ]
        )
    elif r < 0.5:
        gold = "major"
        t = pick(
            [
                f"{svc.capitalize()} is taking 20-30 seconds for customers in the EU region; it still completes, and retrying often helps.",
                f"About 5% of users on the Android app see {svc} fail; the web version works as a workaround.",
            ]
        )
    elif r < 0.75:
        gold = "minor"
        t = pick(
            [
                f"On the {svc} page, a button label is misaligned by a few pixels in Firefox.",
                f"In the internal staging environment, the {svc} tooltip shows a typo.",
            ]
        )
    else:
        gold = "no_defect"
        t = pick(
            [
                f"A customer says {svc} 'rejected' their password, but they were typing their old one; it works with the new one.",
                f"Could {svc} also support dark mode? It would be nice to have.",
                f"User reports {svc} logs them out after 30 days, which is the documented session length.",
            ]
        )
    return t, pick(["What priority should this ticket be assigned?", "How severe is this report?"]), dict(TRI), gold


GENS = [returns] * 5 + [claims] * 2 + [action] * 2 + [moderation] * 2 + [triage] * 2 + [routing] * 2
contrast = sys.argv[4:] == ["--contrast"]
if sys.argv[4:] and not contrast:
    raise SystemExit(f"unknown arguments {sys.argv[4:]}; usage: synthetic_decisions.py N SEED OUT.jsonl [--contrast]")
if contrast:  # about four items a draw, so drawn a fifth as often
    GENS = [returns_contrast] + [g for g in GENS if g is not returns]
n = int(sys.argv[1])
with open(sys.argv[3], "w") as out:
    i = 0
    while i < n:
        g = pick(GENS)
        for state, ins, crit, gold in (g() if g is returns_contrast else [g()])[: n - i]:
            out.write(
                json.dumps(
                    {
                        "id": f"syn-{g.__name__}-{i}",
                        "state": state,
                        "question": {"type": "choice", "instructions": ins, "criteria": crit},
                        "gold": gold,
                    }
                )
                + "\n"
            )
            i += 1
