"""Return requests under a shop's written policy, each labelled by the policy drawn for it.

One of the kinds `decisions.py` mixes. A policy is assembled from the clauses return policies
commonly hold (a window or tiers of windows, member and holiday extensions, final sale with or
without a defect exception, excluded categories, condition rules and restocking fees,
exchange-only discounts, vouchers refunded as credit, cases a person must review whatever the
date); then one case is drawn that exactly one clause decides, or none (an ordinary request), or,
for `returns_contrast`, one case for each answer the policy can lead to. Exactly one reading of
the policy fits each case, so the label is right by construction.
"""

# ruff: noqa: E501  (the generated sentences are kept whole, one per line, to be read as written)

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from openjev.tuning.generators.return_policies import Policy, datefmt, draw_policy

OPTIONS = {
    "approve_full_refund": "Accept the return and refund the full price to the original payment method.",
    "approve_store_credit": "Accept the return and give store credit rather than a refund.",
    "approve_partial_refund": "Accept the return and refund the price minus the restocking fee.",
    "approve_exchange_only": "Offer an exchange for another item, without a refund.",
    "offer_replacement": "Ship a replacement for the damaged or defective item.",
    "deny_outside_window": "Decline the return because it was requested after the window the policy allows.",
    "deny_condition": "Decline the return because the item is not in the condition the policy requires.",
    "deny_final_sale": "Decline the return because the item was sold as final sale.",
    "deny_excluded_category": "Decline the return because the item belongs to a category that cannot be returned.",
    "escalate_to_human": "Send the request to a human agent for review.",
}
REASONS = ["they changed their mind", "it's the wrong size", "it doesn't suit the room", "they ordered two by mistake", "it's not the colour they expected", "they found it cheaper elsewhere"]  # fmt: skip


@dataclass
class Case:
    k: int  # days from delivery to the request
    deliv: dt.date
    item: str
    cond: str
    gold: str
    goods: tuple[str, str, str, str]
    extras: list[str] = field(default_factory=list)


# ---- the case: each function sets what its clause decides


def _late(r: random.Random, p: Policy, c: Case) -> None:
    c.k, c.gold = r.randrange(p.window + 1, p.window + 40), "deny_outside_window"
    if p.member:
        c.k = r.randrange(p.wm + 1, p.wm + 30)


def _edge(r: random.Random, p: Policy, c: Case) -> None:
    c.k = p.w if r.random() < 0.5 else p.w + 1
    c.gold = p.base if c.k == p.w else ("approve_store_credit" if p.tiers else "deny_outside_window")


def _mid(r: random.Random, p: Policy, c: Case) -> None:
    c.k, c.gold = r.randrange(p.w + 1, p.w2 + 1), "approve_store_credit"


def _member_ok(r: random.Random, p: Policy, c: Case) -> None:
    c.k, c.gold = r.randrange(p.window + 1, p.wm + 1), "approve_full_refund"
    c.extras.append(f"The customer is a {p.club} member.")


def _nonmember_late(r: random.Random, p: Policy, c: Case) -> None:
    c.k, c.gold = r.randrange(p.window + 1, p.wm + 1), "deny_outside_window"


def _holiday(r: random.Random, p: Policy, c: Case, inside: bool) -> None:
    if inside:
        c.deliv = dt.date(2025, 11, 15) + dt.timedelta(days=r.randrange(47))
        req = dt.date(2026, 1, 31) - dt.timedelta(days=r.randrange(0, 12))
        c.gold = "approve_full_refund" if p.hg == "full refund" else "approve_store_credit"
        c.k = (req - c.deliv).days
    else:
        c.deliv = dt.date(2026, 1, 5) + dt.timedelta(days=r.randrange(200))
        c.gold = "deny_outside_window"
        c.k = r.randrange(p.window + 1, p.window + 30)
    if p.member and not inside:
        c.k = r.randrange(p.wm + 1, p.wm + 30)
    if inside and c.k <= p.w:
        c.gold = p.base  # the ordinary window still covers it
    elif inside and p.tiers and c.k <= p.w2 and p.hg == "store credit":
        c.gold = "approve_store_credit"


def _final_defect(r: random.Random, p: Policy, c: Case) -> None:
    c.k, c.gold = r.randrange(1, p.kd + 1), "approve_store_credit"
    c.extras.append("It was a Final Sale item and arrived defective.")
    c.cond = ""


def _damaged(r: random.Random, p: Policy, c: Case) -> None:
    c.k, c.gold, c.cond = r.randrange(1, p.w + 40), "offer_replacement", ""
    c.extras.append(
        r.choice(
            [
                "It arrived broken in the box.",
                "It stopped working on the first day.",
                "It arrived with a cracked housing.",
            ]
        )
    )


def _escalate(r: random.Random, p: Policy, c: Case) -> None:
    clause, trigger = r.choice(p.escalations)
    any_date = any(
        x in clause for x in ("whatever the date", "however late", "before any other rule", "before any decision")
    )
    c.k, c.gold = r.randrange(1, p.w + 40) if any_date else c.k, "escalate_to_human"
    c.extras.append(trigger)


def _plain(r: random.Random, p: Policy, c: Case) -> None:
    pass


def _final(r: random.Random, p: Policy, c: Case) -> None:
    c.gold = "deny_final_sale"
    c.extras.append("It was bought from the Final Sale section.")


def _regular_price(r: random.Random, p: Policy, c: Case) -> None:
    c.extras.append("It was bought at the regular price, not on final sale.")


def _excluded(r: random.Random, p: Policy, c: Case) -> None:
    assert p.excluded
    c.item, c.gold, c.cond = p.excluded[0], "deny_excluded_category", "unopened"


def _opened(r: random.Random, p: Policy, c: Case) -> None:
    c.cond, c.gold = c.goods[3], "approve_partial_refund"


def _used(r: random.Random, p: Policy, c: Case) -> None:
    c.cond, c.gold = c.goods[2], "deny_condition"


def _discounted(r: random.Random, p: Policy, c: Case) -> None:
    c.gold = "approve_exchange_only"
    c.extras.append(f"It was bought at {r.choice([20, 25, 30, 40])}% off.")


def _voucher(r: random.Random, p: Policy, c: Case) -> None:
    c.gold = "approve_store_credit"
    c.extras.append("It was paid for entirely with a promotional voucher.")


def _big(r: random.Random, p: Policy, c: Case) -> None:
    c.gold = "escalate_to_human"
    c.extras.append(f"The order total was ${p.limit + r.randrange(50, 900):,}.")


CASES: dict[str, Callable[[random.Random, Policy, Case], None]] = {
    "plain": _plain,
    "late": _late,
    "edge": _edge,
    "mid": _mid,
    "member_ok": _member_ok,
    "nonmember_late": _nonmember_late,
    "holiday_ok": lambda r, p, c: _holiday(r, p, c, inside=True),
    "holiday_outside": lambda r, p, c: _holiday(r, p, c, inside=False),
    "final": _final,
    "regular_price": _regular_price,
    "final_defect": _final_defect,
    "excluded": _excluded,
    "opened": _opened,
    "used": _used,
    "discounted": _discounted,
    "voucher": _voucher,
    "damaged": _damaged,
    "big": _big,
    "escalate": _escalate,
}
NO_REASON = ("damaged", "final_defect", "escalate")  # the facts are the reason


def _context(r: random.Random, p: Policy, case: str, c: Case) -> None:
    """Facts about clauses that do not decide this case, so that none is left in doubt."""
    if p.member and case != "member_ok":
        c.extras.append("The customer is not a club member.")
    if p.big and case != "big":
        c.extras.append(f"The order total was ${r.randrange(20, p.limit - 10):,}.")
    if p.discount and case != "discounted" and r.random() < 0.5:
        c.extras.append("It was bought at full price.")
    if p.voucher and case != "voucher" and r.random() < 0.5:
        c.extras.append("It was paid for by card.")


def _request(r: random.Random, case: str, c: Case) -> str:
    req = c.deliv + dt.timedelta(days=c.k)
    ordered = ""
    if r.random() < 0.25:
        ordered = f", ordered on {datefmt(r, c.deliv - dt.timedelta(days=r.randrange(2, 20)))},"
    text = f"{c.item.capitalize()}{ordered} was delivered on {datefmt(r, c.deliv)}. The customer asked to return it on {datefmt(r, req)}"
    text += "." if case in NO_REASON else f" because {r.choice(REASONS)}."
    if c.cond:
        text += f" It is {c.cond}."
    r.shuffle(c.extras)
    return " ".join([text, *c.extras])


def _criteria(r: random.Random, p: Policy, golds: set[str]) -> tuple[dict[str, str], Callable[[str], str]]:
    """The options offered, and how a case's answer reads among them (one catch-all refusal, at times)."""
    must = {*golds, p.base, "deny_outside_window"}
    relevant = (
        ("deny_final_sale", p.final),
        ("deny_condition", p.condition and not p.restocking),
        ("approve_partial_refund", p.restocking),
        ("approve_exchange_only", p.discount),
        ("offer_replacement", p.replace),
        ("escalate_to_human", p.big or bool(p.escalations)),
        ("deny_excluded_category", bool(p.excluded)),
        ("approve_store_credit", p.tiers or p.voucher or p.final_exception or p.holiday),
    )
    for key, present in relevant:
        if present and r.random() < 0.8:
            must.add(key)
    rest = [x for x in OPTIONS if x not in must]
    keys = sorted(must) + r.sample(rest, min(len(rest), r.randrange(0, 3)))
    r.shuffle(keys)
    criteria = {x: OPTIONS[x] for x in keys}
    refusals = [x for x in keys if x.startswith("deny_")]
    if r.random() < 0.15 and len(refusals) > 1:  # one catch-all refusal instead of reasons
        criteria = {x: d for x, d in criteria.items() if not x.startswith("deny_")}
        criteria["deny_return"] = "Decline the return."
        return criteria, lambda gold: "deny_return" if gold.startswith("deny_") else gold
    return criteria, lambda gold: gold


INSTRUCTIONS = [
    "Under this policy, what should the decision on the return request be?",
    "How should the return request be handled under the shop's policy?",
    "Applying the policy above, which decision is correct?",
]
Item = tuple[str, str, dict[str, str], str]


def _case(r: random.Random, p: Policy, goods: tuple[str, str, str, str], case: str) -> Case:
    c = Case(
        k=r.randrange(min(3, p.w), p.w + 1),
        deliv=dt.date(2026, 1, 1) + dt.timedelta(days=r.randrange(20, 300)),  # drawn after k, as ever
        item=goods[0],
        cond=goods[1],
        gold=p.base,
        goods=goods,
    )
    CASES[case](r, p, c)
    _context(r, p, case, c)
    return c


def _state(r: random.Random, shop: str, p: Policy, case: str, c: Case) -> str:
    rules = " ".join(f"{i + 1}) {x}" for i, x in enumerate(p.rules))
    return f"Policy ({shop}): {rules} Request: " + _request(r, case, c)


def returns(r: random.Random) -> Item:
    shop, p, goods = draw_policy(r)
    case = r.choice(p.cases)
    c = _case(r, p, goods, case)
    state = _state(r, shop, p, case, c)
    criteria, read = _criteria(r, p, {c.gold})
    return state, r.choice(INSTRUCTIONS), criteria, read(c.gold)


def returns_contrast(r: random.Random) -> list[Item]:
    """One policy and one request for each answer it can lead to, all asked with the same options.

    The design of a contrastive benchmark, where each policy comes with one case per option: the
    same rule text must be read to different answers by the facts of each case, and the rarer
    outcomes (a person reviews it, a category is excluded) are as frequent as an ordinary refund.
    """
    shop, p, goods = draw_policy(r)
    kinds = sorted(set(p.cases))
    by_gold: dict[str, tuple[str, Case]] = {}
    for case in r.sample(kinds, len(kinds)):  # which case stands for an answer is drawn too
        c = _case(r, p, goods, case)
        by_gold.setdefault(c.gold, (case, c))
    criteria, read = _criteria(r, p, set(by_gold))
    ins = r.choice(INSTRUCTIONS)
    items: dict[str, Item] = {}
    for gold, (case, c) in by_gold.items():
        items.setdefault(read(gold), (_state(r, shop, p, case, c), ins, criteria, read(gold)))
    return list(items.values())
