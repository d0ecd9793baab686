"""Request mutations over a `RequestHistory`: each edits the decoded request in place and says what it did.

Every mutation takes the fault's seeded RNG, so the same seed, rule, session and match mutate the
same way. What a mutation returns goes on the fault record (and the span's fault event): positions,
roles and counts, never message text.
"""

from __future__ import annotations

import copy
import random
import re
from typing import Any

from brownout.core.wire.history import RequestHistory

__all__ = ["add_typos", "drop", "duplicate", "inject", "reorder", "truncate_history", "typos"]

# Letters-only words of three or more: a typo in "a" or "42" reads as a different word, not a slip.
_WORD = re.compile(r"[^\W\d_]{3,}")
# QWERTY neighbours, so a substitution is the key next to the intended one, as a hurried typist hits.
_ROWS = ("qwertyuiop", "asdfghjkl", "zxcvbnm")
_NEIGHBOURS: dict[str, str] = {}
for _r, _row in enumerate(_ROWS):
    for _c, _ch in enumerate(_row):
        near = [_row[j] for j in (_c - 1, _c + 1) if 0 <= j < len(_row)]
        near += [_ROWS[rr][_c] for rr in (_r - 1, _r + 1) if 0 <= rr < len(_ROWS) and _c < len(_ROWS[rr])]
        _NEIGHBOURS[_ch] = "".join(near)

Outcome = dict[str, Any]


def _typo(word: str, rng: random.Random) -> str:
    """One slip of the fingers: swapped, dropped, doubled or neighbouring letter; never the same word."""
    i = rng.randrange(1, len(word) - 1)  # people rarely miss a word's first key
    kind = rng.choice(("swap", "drop", "double", "near"))
    if kind == "swap" and word[i] != word[i + 1]:
        return word[:i] + word[i + 1] + word[i] + word[i + 2 :]
    if kind == "double":
        return word[: i + 1] + word[i] + word[i + 1 :]
    near = _NEIGHBOURS.get(word[i].lower())
    if kind == "near" and near:
        ch = rng.choice(near)
        return word[:i] + (ch.upper() if word[i].isupper() else ch) + word[i + 1 :]
    return word[:i] + word[i + 1 :]  # drop, and the fallback for letters with no neighbour or twins


def add_typos(texts: list[str], rate: float, rng: random.Random) -> tuple[list[str], int]:
    """Each word gets a typo with probability `rate`; at least one word does when there is any."""
    words = [(t, m) for t, text in enumerate(texts) for m in _WORD.finditer(text)]
    if not words:
        return texts, 0
    chosen = [w for w in words if rng.random() < rate] or [rng.choice(words)]
    by_text: dict[int, list[re.Match[str]]] = {}
    for t, m in chosen:
        by_text.setdefault(t, []).append(m)
    out = list(texts)
    for t, matches in by_text.items():
        text, pieces, last = texts[t], [], 0
        for m in matches:
            pieces += [text[last : m.start()], _typo(m.group(), rng)]
            last = m.end()
        out[t] = "".join(pieces) + text[last:]
    return out, len(chosen)


def _skipped(reason: str) -> Outcome:
    return {"mutated": False, "reason": reason}


def typos(history: RequestHistory, rng: random.Random, *, rate: float) -> Outcome:
    """Noise in the last message the user wrote."""
    found = history.last_user_text()
    if found is None:
        return _skipped("no user message")
    index, slots = found
    new, count = add_typos([s.get() for s in slots], rate, rng)
    if not count:
        return _skipped("the user message has no words")
    for slot, text in zip(slots, new, strict=True):
        slot.set(text)
    return {"mutated": True, "message_index": index, "typos": count}


def inject(history: RequestHistory, *, text: str, at_start: bool, separator: str) -> Outcome:
    """An instruction planted in the most recent tool result the agent sends back."""
    found = history.last_tool_result()
    if found is None:
        return _skipped("no tool result")
    index, call_id, slot = found
    old = slot.get()
    if not old:
        slot.set(text)
    else:
        slot.set(text + separator + old if at_start else old + separator + text)
    outcome: Outcome = {"mutated": True, "message_index": index}
    if call_id:
        outcome["tool_call_id"] = call_id
    return outcome


def _candidates(history: RequestHistory, roles: list[str]) -> list[int]:
    """History messages a memory could lose: not pinned (system), not the current turn (the last)."""
    messages = history.messages()
    return [i for i, m in enumerate(messages[:-1]) if not history.pinned(m) and (not roles or history.role(m) in roles)]


def drop(history: RequestHistory, rng: random.Random, *, roles: list[str]) -> Outcome:
    """One history message lost."""
    candidates = _candidates(history, roles)
    if not candidates:
        return _skipped("no history message to drop")
    i = rng.choice(candidates)
    role = history.role(history.messages().pop(i))
    return {"mutated": True, "message_index": i, "role": role}


def duplicate(history: RequestHistory, rng: random.Random, *, roles: list[str]) -> Outcome:
    """One history message sent twice in a row."""
    candidates = _candidates(history, roles)
    if not candidates:
        return _skipped("no history message to duplicate")
    i = rng.choice(candidates)
    messages = history.messages()
    messages.insert(i + 1, copy.deepcopy(messages[i]))
    return {"mutated": True, "message_index": i, "role": history.role(messages[i])}


def reorder(history: RequestHistory, rng: random.Random) -> Outcome:
    """The most recent parallel tool results, in another order."""
    groups = history.parallel_results()
    if not groups:
        return _skipped("no parallel tool results")
    group = groups[-1]
    n = len(group.indices)
    order = list(range(n))
    rng.shuffle(order)
    if order == sorted(order):  # a shuffle may give back the original: rotate instead
        order = order[1:] + order[:1]
    originals = [group.items[i] for i in group.indices]
    for pos, src in zip(group.indices, order, strict=True):
        group.items[pos] = originals[src]
    return {"mutated": True, "message_index": group.message_index, "order": order}


def truncate_history(history: RequestHistory, *, count: int) -> Outcome:
    """The oldest `count` messages cut (system messages and the current turn stay)."""
    messages = history.messages()
    doomed = [i for i, m in enumerate(messages[:-1]) if not history.pinned(m)][:count]
    if not doomed:
        return _skipped("no history message to cut")
    for i in reversed(doomed):
        del messages[i]
    return {"mutated": True, "dropped": len(doomed)}
