"""Return policies drawn at random, clause by clause, for the return requests of `returns.py`.

The clauses are those return policies commonly hold: a window or tiers of windows, member and
holiday extensions, final sale with or without a defect exception, excluded categories, condition
rules and restocking fees, exchange-only discounts, vouchers refunded as credit, and cases a
person must review. Each clause adds the cases it decides to the policy's list.
"""

# ruff: noqa: E501  (the generated sentences are kept whole, one per line, to be read as written)

from __future__ import annotations

import datetime as dt
import random
from dataclasses import dataclass, field

SYL = ["bran", "cor", "del", "fen", "gal", "hol", "ket", "lum", "mor", "nav", "pel", "quil", "ros", "sten", "tav", "ver", "wyn", "zel", "ash", "bel", "cal", "dor"]  # fmt: skip


def name(r: random.Random) -> str:
    return (r.choice(SYL) + r.choice(SYL) + r.choice(["", "ly", "ton", "wick", "field", "more", "a"])).capitalize()


def datefmt(r: random.Random, d: dt.date) -> str:
    f = r.random()
    if f < 0.5:
        return d.isoformat()
    if f < 0.75:
        return d.strftime("%B %-d, %Y")
    return d.strftime("%-d %B %Y")


# (item, fine condition, used condition, opened condition)
GOODS = [
    ("a wool sweater", "unworn, tags attached", "worn twice", "tried on, tags removed"),
    ("a pair of running shoes", "unworn, in the original box", "worn on two runs", "tried on indoors"),
    ("a blender", "unused, still sealed", "used a few times", "unboxed but unused"),
    ("a board game", "still shrink-wrapped", "played several times", "opened, pieces unpunched"),
    ("a desk lamp", "unused, in its packaging", "used for a week", "unboxed and switched on once"),
    ("a set of bed sheets", "unwashed, still folded in the package", "washed and slept on", "unfolded, not washed"),
    ("a rain jacket", "unworn with tags", "worn on a hike", "tried on, tags cut off"),
    ("a coffee grinder", "unused, factory seal intact", "used daily for a month", "opened but never used"),
    ("a bookshelf", "unassembled, in its box", "assembled and used", "unboxed, not assembled"),
    ("a pair of headphones", "unopened", "worn for weeks", "opened and tested once"),
    ("a cast-iron pan", "unused, in the box", "seasoned and cooked with", "unwrapped, never heated"),
]
EXCLUDED = [
    ("a box of fresh pastries", "fresh and chilled food"),
    ("an engraved silver bracelet", "engraved or personalised items"),
    ("a pack of underwear", "underwear and swimwear"),
    ("a bag of frozen dumplings", "frozen food"),
    ("a custom-printed mug", "personalised items"),
]
# Escalations: (policy clause, the case that triggers it)
ESCALATIONS = [
    (
        "If the customer disputes the recorded delivery date, a person reviews the request before any other rule is applied.",
        "The customer says the tracking date is wrong and the parcel reached them days later than recorded.",
    ),
    (
        "If the carrier recorded no delivery scan, a human agent establishes the delivery date before any decision.",
        "The carrier has no delivery scan on record for this parcel.",
    ),
    (
        "Any report that a product caused a fire, burn or injury goes to the human safety team, whatever the date.",
        "The customer says it overheated and burned their hand on first use.",
    ),
    (
        "Items reported damaged in transit are sent to the claims team for human review, however late the report.",
        "The customer reports that it arrived cracked from shipping.",
    ),
    (
        "Gift recipients without a gift receipt are referred to a human agent, who contacts the purchaser.",
        "The person asking received it as a gift and has no gift receipt.",
    ),
    (
        "Signed, rare or collectible items are assessed by a specialist before any return is accepted.",
        "It is a signed collector's edition.",
    ),
]


@dataclass
class Policy:
    """What was drawn for one shop: its clauses, and the cases they make possible."""

    base: str  # the ordinary approval
    credit_shop: bool
    tiers: bool  # full refund, then store credit, then nothing
    w: int
    w2: int
    rules: list[str] = field(default_factory=list)
    cases: list[str] = field(default_factory=lambda: ["plain", "plain", "late", "late", "edge"])
    member: bool = False
    wm: int = 0
    club: str = ""
    holiday: bool = False
    hg: str = ""
    final: bool = False
    final_exception: bool = False
    kd: int = 0
    excluded: tuple[str, str] | None = None
    condition: bool = False
    restocking: bool = False
    discount: bool = False
    voucher: bool = False
    replace: bool = False
    escalations: list[tuple[str, str]] = field(default_factory=list)
    big: bool = False
    limit: int = 0

    @property
    def window(self) -> int:
        """The last day anyone gets something back, members and holidays aside."""
        return self.w2 if self.tiers else self.w


def _window_clauses(r: random.Random, p: Policy) -> None:
    paid = "store credit only" if p.credit_shop else "a full refund"
    if p.tiers:
        p.rules += [
            r.choice(
                [
                    f"Requests within {p.w} days of delivery: full refund.",
                    f"Full refund if the return is requested no more than {p.w} days after delivery.",
                ]
            ),
            f"Requests {p.w + 1} to {p.w2} days after delivery: store credit only.",
            r.choice(
                [f"After {p.w2} days: no returns.", f"Requests more than {p.w2} days after delivery are declined."]
            ),
        ]
        p.cases += ["mid", "mid"]
        return
    p.rules.append(
        r.choice(
            [
                f"Items in their original condition may be returned within {p.w} days of delivery for {paid}.",
                f"Returns requested no more than {p.w} days after delivery (day {p.w} included) get {paid}.",
                f"{paid.capitalize()} if the return is requested within {p.w} days of the delivery date.",
            ]
        )
    )


def _extensions(r: random.Random, p: Policy) -> None:
    p.member = r.random() < 0.15
    if p.member:
        p.wm = p.window + r.choice([30, 45, 60])
        p.club = name(r) + " Club"
        p.rules.insert(0, f"{p.club} members: full refund if requested within {p.wm} days of delivery.")
        p.cases += ["member_ok", "member_ok", "nonmember_late"]
    p.holiday = r.random() < 0.12
    if p.holiday:
        p.hg = r.choice(["full refund", "store credit"])
        p.rules.append(
            f"Holiday extension: deliveries from 2025-11-15 to 2025-12-31 can be returned for {p.hg} if requested by 2026-01-31."
        )
        p.cases += ["holiday_ok", "holiday_ok", "holiday_outside"]


def _exclusions(r: random.Random, p: Policy) -> None:
    p.final = r.random() < 0.3
    p.final_exception = p.final and r.random() < 0.4
    p.kd = r.choice([5, 7, 10])
    if p.final:
        p.rules.append(
            r.choice(["Final Sale items cannot be returned.", "Items bought as final sale are not returnable."])
        )
        p.cases += ["final", "regular_price"]
        if p.final_exception:
            p.rules.append(
                f"Exception: a Final Sale item that arrives defective may be returned for store credit if requested within {p.kd} days of delivery."
            )
            p.cases += ["final_defect"]
    p.excluded = r.choice(EXCLUDED) if r.random() < 0.15 else None
    if p.excluded:
        p.rules.append(f"{p.excluded[1].capitalize()} cannot be returned.")
        p.cases += ["excluded"]


def _condition(r: random.Random, p: Policy) -> None:
    p.condition = r.random() < 0.5
    p.restocking = p.condition and r.random() < 0.35
    fee = r.choice([10, 15, 20])
    if not p.condition:
        return
    if p.restocking:
        p.rules.append(f"Opened items: refund minus a {fee}% restocking fee, same window.")
        p.cases += ["opened"]
    else:
        p.rules.append(
            r.choice(["Used items are not accepted.", "Items that have been used or worn cannot be returned."])
        )
        p.cases += ["used"]


def _payment(r: random.Random, p: Policy) -> None:
    p.discount = not p.credit_shop and r.random() < 0.12
    if p.discount:
        p.rules.append("Discounted items: exchange only, within the same window.")
        p.cases += ["discounted"]
    p.voucher = not p.credit_shop and r.random() < 0.12
    if p.voucher:
        p.rules.append("Orders paid entirely with a gift card or promotional voucher are refunded as store credit.")
        p.cases += ["voucher"]
    p.replace = not p.final_exception and r.random() < 0.2
    if p.replace:
        p.rules.append("Items that arrive damaged or defective are replaced free of charge, whatever the date.")
        p.cases += ["damaged"]


def _reviews(r: random.Random, p: Policy) -> None:
    escalations = [e for e in ESCALATIONS if not (p.replace and "damaged" in e[0])]
    p.escalations = r.sample(escalations, r.choice([0, 0, 1, 1, 2]))
    p.big = r.random() < 0.2
    if p.big:
        p.limit = r.choice([500, 1000, 2000])
        p.rules.append(
            f"Orders of ${p.limit:,} or more: every return request is reviewed by a supervisor before any decision."
        )
        p.cases += ["big"]
    for text, _ in p.escalations:
        p.rules.append(text)
        p.cases += ["escalate"]
    if r.random() < 0.5:
        p.rules.append(
            r.choice(
                [
                    "Requests outside these windows are declined.",
                    "Later requests are declined.",
                    "All other requests are denied.",
                ]
            )
        )


def draw_policy(r: random.Random) -> tuple[str, Policy, tuple[str, str, str, str]]:
    shop = name(r)
    goods = r.choice(GOODS)
    credit_shop = r.random() < 0.2
    tiers = not credit_shop and r.random() < 0.3
    w = r.choice([7, 10, 14, 14, 20, 21, 30, 30, 30, 45, 60])
    p = Policy(
        "approve_store_credit" if credit_shop else "approve_full_refund",
        credit_shop,
        tiers,
        w,
        w + r.choice([15, 20, 30, 45]),
    )
    for clauses in (_window_clauses, _extensions, _exclusions, _condition, _payment, _reviews):
        clauses(r, p)
    return shop, p, goods
