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

:func:`build_cheapest_hotel_autogen` is the same team in AutoGen (an AssistantAgent with both tools and an auditor in
a round robin); it is no suite case (an 8th misread case would be held out, and this one was written with the rule):
the detector's AutoGen test runs it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from causaltrace.testing.faults.teams_smolagents import errors, find, make_tool, string, tool_agent
from causaltrace.testing.faults.teams_smolagents import number as number_input
from causaltrace.testing.smolagents import Call, ScriptedRequest

__all__ = ["BUILDERS", "build_cheapest_hotel_autogen"]

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


def build_cheapest_hotel_autogen(planted: bool, *, city: str = "Lisbon", nights: int = 3,
                                 hotels: Sequence[tuple[str, int]] = (("Hotel Alfama", 140), ("Hotel Baixa", 95),
                                                                      ("Hotel Chiado", 120))) -> Any:
    """:func:`build_cheapest_hotel` in AutoGen: ``travel_agent`` (both tools) then an auditor that approves the
    booking it reports."""
    from causaltrace.testing.autogen import call
    from causaltrace.testing.faults.teams_autogen import agent, ok, round_robin, said, tool

    rates = dict(hotels)
    listing = "; ".join(f"{name} {rate} EUR per night" for name, rate in hotels)
    names = [name for name, _ in hotels]

    async def search_hotels(city: str) -> str:
        """The hotels of a city with their nightly rates."""
        return f"{city} hotels: {listing}"

    async def book_hotel(hotel: str, nights: int) -> str:
        """Book a hotel for a number of nights."""
        return f"booked {hotel} for {int(nights)} nights: total {rates.get(hotel, 0) * int(nights)} EUR"

    def travel(request: Any) -> Any:
        done = ok(request, "book_hotel")
        if done is not None:
            booked = re.search(r"booked (.+?) for \d+ nights: total (\d+) EUR", done)
            return f"BOOKED: {booked.group(1)}, {booked.group(2)} EUR" if booked else "BOOKED: none"
        seen = ok(request, "search_hotels")
        if seen is not None:
            listed = {m.group(1): int(m.group(2)) for m in re.finditer(r"([A-Z][\w ]+?) (\d+) EUR", seen)}
            cheapest = min(listed, key=listed.__getitem__) if listed else names[0]
            pick = names[(names.index(cheapest) + 1) % len(names)] if planted else cheapest
            return call("book_hotel", hotel=pick, nights=nights)
        return call("search_hotels", city=city)

    def auditor(request: Any) -> str:
        found = said(request, "travel_agent", r"BOOKED: (.+)")
        return f"BOOKED: {found.group(1)} checked. APPROVE" if found else "REJECT: nothing booked."

    worker = agent("travel_agent", travel, [tool(search_hotels, "Hotels.", flaky=True), tool(book_hotel, "Book.")])
    return round_robin([worker, agent("auditor", auditor)], "APPROVE", 6)


BUILDERS = {"cheapest_hotel": build_cheapest_hotel}
