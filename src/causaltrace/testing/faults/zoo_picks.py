"""The failure zoo's wrong-pick teams (issue 32, fifth session): the request asks for the extreme of a list a tool
returned (the cheapest, the shortest…) and an agent acts on another entry of that list.

Reactive scripted teams like those of :mod:`.zoo_smolagents` (deterministic functions of the request; ``planted``
switches ONE decisive error on). The lookup tool fails on its first call and is retried (the recovered distractor).

=====================  =========================================================================================
builder                the team, the planted error
=====================  =========================================================================================
cheapest_hotel         ToolCallingAgent ``travel_agent``: ``search_hotels`` (flaky) lists a city's hotels with
                       their nightly rates, ``book_hotel`` books one; planted: it books the hotel listed after the
                       cheapest one
=====================  =========================================================================================
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from causaltrace.testing.faults.teams_smolagents import errors, find, make_tool, string, tool_agent
from causaltrace.testing.faults.teams_smolagents import number as number_input
from causaltrace.testing.smolagents import Call, ScriptedRequest

__all__ = ["BUILDERS"]

Reply = str | list[Call]


def build_cheapest_hotel(planted: bool, *, city: str = "Lisbon", nights: int = 3,
                         hotels: Sequence[tuple[str, int]] = (("Hotel Alfama", 140), ("Hotel Baixa", 95),
                                                              ("Hotel Chiado", 120))) -> Any:
    """``search_hotels`` (flaky) then ``book_hotel``; planted: the agent books the hotel after the cheapest."""
    rates = dict(hotels)
    listing = "; ".join(f"{name} {rate} EUR per night" for name, rate in hotels)
    search = make_tool("search_hotels", "The hotels of a city with their nightly rates.",
                       {"city": string("the city")}, "string", lambda city: f"{city} hotels: {listing}", flaky=True)
    book = make_tool("book_hotel", "Book a hotel for a number of nights.",
                     {"hotel": string("the hotel's name"), "nights": number_input("how many nights")}, "string",
                     lambda hotel, nights: f"booked {hotel} for {int(nights)} nights: total "
                                           f"{rates.get(hotel, 0) * int(nights)} EUR")
    names = [name for name, _ in hotels]

    def policy(request: ScriptedRequest) -> Reply:
        if request.is_final_summary:
            return "no booking"
        done = find(request, r"booked (.+?) for \d+ nights: total (\d+) EUR")
        if done:
            return [Call("final_answer", {"answer": f"BOOKED: {done.group(1)}, {done.group(2)} EUR"})]
        seen = find(request, r"hotels: (.+)")
        if seen:
            listed = {m.group(1): int(m.group(2)) for m in re.finditer(r"([A-Z][\w ]+?) (\d+) EUR", seen.group(1))}
            cheapest = min(listed, key=listed.__getitem__) if listed else names[0]
            pick = names[(names.index(cheapest) + 1) % len(names)] if planted else cheapest
            return [Call("book_hotel", {"hotel": pick, "nights": nights})]
        if errors(request) >= 3:
            return [Call("final_answer", {"answer": "no hotels found"})]
        return [Call("search_hotels", {"city": city})]

    return tool_agent(policy, [search, book], "travel_agent")


BUILDERS = {"cheapest_hotel": build_cheapest_hotel}
