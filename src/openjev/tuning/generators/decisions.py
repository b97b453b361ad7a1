"""The six-kind mix of decisions that apply a written rule to a case, each labelled by the rule itself.

Return requests under a shop's policy (`returns.py`), claims against evidence, an agent's proposed
action under an action policy, forum posts under moderation rules, bug-report severity, and requests
routed to an assistant's tools (`routing.py`). Names, goods, windows, dates (three formats), rules,
option sets and phrasings are drawn at random; the gold answer is computed from what was drawn, so
it is right by construction. The texts are these files' own: no item of any dev set is copied. The
shipped adapter was trained on this output, so the draws keep their order: the same count and seed
write the same bytes.
"""

# ruff: noqa: E501  (the generated sentences are kept whole, one per line, to be read as written)

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Mapping

from openjev.tuning.generators.return_policies import name
from openjev.tuning.generators.returns import Item, returns, returns_contrast
from openjev.tuning.generators.routing import routing

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


def claims(r: random.Random) -> Item:
    ent = (
        r.choice(
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
        + name(r)
    )
    fs = r.sample(FACTS, 3)
    shown = fs[:2]
    absent = fs[2]
    vals = {f[0]: r.choice(f[2]) for f in fs}
    ev = f"Evidence: {ent}: " + "; ".join(f[1].format(v=vals[f[0]]) for f in shown) + "."
    roll = r.random()
    if roll < 0.34:
        gold = "supported"
        f = r.choice(shown)
        v = vals[f[0]]
    elif roll < 0.67:
        gold = "contradicted"
        f = r.choice(shown)
        v = r.choice([x for x in f[2] if x != vals[f[0]]])
    else:
        gold = "not_enough_info"
        f = absent
        v = vals[f[0]]
    return (
        ev + "\nClaim: " + CLAIMT[f[0]].format(v=v),
        r.choice(
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


def action(r: random.Random) -> Item:
    kind, *acts = r.choice(ACT)
    a = r.choice(acts)
    env = r.choice(["production", "production", "staging", "a local dev database", "the test environment"])
    prod = env == "production"
    if kind == "read" or kind == "email_int" or (not prod and kind in ("write", "destroy")):
        gold = "auto_approve"
    elif kind == "destroy":
        gold = "block"
    else:
        gold = "require_human_review"
    envs = "" if kind in ("pay", "email_ext", "email_int") else f" Target: {env}."
    # The ticket number is drawn whichever context is chosen: the list is built before the choice.
    state = f"Agent: {name(r).lower()}-bot.{envs} Proposed action: {a}. Context: {r.choice(['a user asked for it in chat', 'part of a nightly maintenance job', 'requested in ticket #' + str(r.randrange(1000, 9999)), 'the agent decided this cleans up after a failed run'])}."
    return (
        state,
        r.choice(
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


def moderation(r: random.Random) -> Item:
    cat = r.choice(list(POSTS))
    post = r.choice(POSTS[cat]).format(
        p=r.choice(["garden tools", "bike parts", "sourdough starters", "guitar strings", "watercolor brushes"]),
        s=name(r).lower(),
        u=name(r).lower(),
    )
    gold = {
        "spam": "remove_spam",
        "harassment": "remove_harassment",
        "self_harm": "escalate_self_harm",
        "allow": "allow",
    }[cat]
    forum = name(r) + " " + r.choice(["Forum", "Community", "Club board"])
    rules = [
        "personal attacks and threats against members are not allowed (joking between friends, and quoting abuse when reporting it, are fine)",
        "advertising and repeated promotional links are removed",
        "anyone who seems at immediate risk of harming themselves is referred to the safety team",
    ]
    r.shuffle(rules)
    ins = (
        f"The {forum} rules: "
        + "; ".join(rules)
        + ". "
        + r.choice(["What should the moderator do with this post?", "Which moderation action fits this post?"])
    )
    return post, ins, dict(MODO), gold


# ---------------- triage
TRI = {
    "critical": "Critical: a main feature is unavailable or damaging data for (nearly) everyone; respond now.",
    "major": "Major: an important feature is degraded or failing for some users, or users can work around it.",
    "minor": "Minor: a cosmetic or small defect, few users or internal systems only; not urgent.",
    "no_defect": "No defect: the product behaves as intended (user mistake, documented behaviour, or a request for something new).",
}


def triage(r: random.Random) -> Item:
    svc = r.choice(
        ["checkout", "login", "payments API", "search", "file upload", "notifications", "reporting dashboard"]
    )
    roll = r.random()
    if roll < 0.25:
        gold = "critical"
        t = r.choice(
            [
                f"Since the 09:10 deploy, {svc} returns HTTP 500 for every customer; nobody can complete it.",
                f"The {svc} service has been writing corrupted records for all accounts since last night's release; thousands affected and rising.",
            ]
        )
    elif roll < 0.5:
        gold = "major"
        t = r.choice(
            [
                f"{svc.capitalize()} is taking 20-30 seconds for customers in the EU region; it still completes, and retrying often helps.",
                f"About 5% of users on the Android app see {svc} fail; the web version works as a workaround.",
            ]
        )
    elif roll < 0.75:
        gold = "minor"
        t = r.choice(
            [
                f"On the {svc} page, a button label is misaligned by a few pixels in Firefox.",
                f"In the internal staging environment, the {svc} tooltip shows a typo.",
            ]
        )
    else:
        gold = "no_defect"
        t = r.choice(
            [
                f"A customer says {svc} 'rejected' their password, but they were typing their old one; it works with the new one.",
                f"Could {svc} also support dark mode? It would be nice to have.",
                f"User reports {svc} logs them out after 30 days, which is the documented session length.",
            ]
        )
    return t, r.choice(["What priority should this ticket be assigned?", "How severe is this report?"]), dict(TRI), gold


# ---------------- the mix
Kind = Callable[[random.Random], list[Item]]


def _one(kind: Callable[[random.Random], Item]) -> Kind:
    return lambda r: [kind(r)]


# A kind's weight is how often it stands in the list: one draw picks an entry, so the order counts too.
MIX: list[tuple[str, Kind]] = (
    [("returns", _one(returns))] * 5
    + [("claims", _one(claims))] * 2
    + [("action", _one(action))] * 2
    + [("moderation", _one(moderation))] * 2
    + [("triage", _one(triage))] * 2
    + [("routing", _one(routing))] * 2
)
# About four items a draw, so drawn a fifth as often as single return requests were.
CONTRAST_MIX: list[tuple[str, Kind]] = [("returns_contrast", returns_contrast)] + [
    entry for entry in MIX if entry[0] != "returns"
]


def generate(count: int, seed: int, options: Mapping[str, bool]) -> Iterator[dict[str, object]]:
    """`count` items, one random stream from `seed` (what `openjev generate decisions` writes).

    `contrast` swaps single return requests for `returns_contrast`: one policy with a request for
    each answer it can lead to; a draw past `count` is cut short.
    """
    r = random.Random(seed)
    mix = CONTRAST_MIX if options["contrast"] else MIX
    i = 0
    while i < count:
        kind, draw = r.choice(mix)
        for state, ins, crit, gold in draw(r)[: count - i]:
            yield {
                "id": f"syn-{kind}-{i}",
                "state": state,
                "question": {"type": "choice", "instructions": ins, "criteria": crit},
                "gold": gold,
            }
            i += 1
