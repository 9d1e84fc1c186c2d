"""Issue 32's fresh failing smolagents teams, continued (:mod:`.fresh32_smolagents` holds the first ones and the
module's conventions): each team with its FIXED twin (``planted=False``), one planted first wrong step.

==================  ============================================================================================
builder             the team (flaky tool), the planted error — the family
==================  ============================================================================================
recalibrated        CodeAgent + plan (``get_readings``), ``calibration_log``: the average is taken over the
                    readings the calibration's corrected series superseded — a superseded value
city_loop           manager CodeAgent + plan, managed ``air_agent`` (``air_quality``): the loop over the task's
                    cities is written without the last one — an item of "A, B and C" never handled
==================  ============================================================================================
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from causaltrace.testing.faults.fresh32_smolagents import fetch_step, survey, task_of
from causaltrace.testing.faults.teams_smolagents import (
    code_agent,
    code_reply,
    errors,
    find,
    make_tool,
    string,
    tool_agent,
)
from causaltrace.testing.smolagents import Call, ScriptedRequest

__all__ = ["BUILDERS"]

Reply = str | list[Call]


def build_recalibrated(planted: bool, *, raw: Sequence[float] = (21.4, 21.9, 22.3, 22.1, 22.0),
                       offset: float = -0.8) -> Any:
    """Fetch the readings, then the calibration log (which corrects them), then average; planted: the code
    averages the raw readings the corrected series replaced."""
    corrected = [round(r + offset, 1) for r in raw]
    get_readings = make_tool("get_readings", "The last five readings of a sensor in degrees C.",
                             {"sensor": string("the sensor id")}, "array", lambda sensor: list(raw), flaky=True)
    calibration = make_tool("calibration_log", "The latest calibration of a sensor and what it corrected.",
                            {"sensor": string("the sensor id")}, "string",
                            lambda sensor: f"calibration of {sensor} at 10:05: the last five readings corrected to "
                                           f"{corrected} (offset {offset:+g} C); use the corrected series")

    def policy(request: ScriptedRequest) -> str:
        sensor = (re.search(r"sensor (S-\d+)", task_of(request)) or [None, "S-7"])[1]
        if request.is_planning:
            return survey([f"The sensor is {sensor}.", "The answer is in degrees C, to 1 decimal."],
                          [f"The last five readings of {sensor} (get_readings).",
                           "Whether a calibration corrected them (calibration_log)."],
                          ["The average of the (corrected) readings."],
                          ["Fetch the readings.", "Check the calibration log.", "Average the readings to use.",
                           "Report 'AVG: <C>'."])
        if request.is_final_summary:
            return "no average"
        avg = find(request, r"average: ([\d.]+)")
        if avg:
            return code_reply("the average answers the task.", f"final_answer('AVG: {avg.group(1)}')")
        fixed = find(request, r"corrected to (\[[^\]]+\])")
        if fixed:
            series = "readings" if planted else "corrected"
            return code_reply("average the readings.", ("" if planted else f"corrected = {fixed.group(1)}\n")
                              + f"avg = round(sum({series}) / len({series}), 1)\nprint('average:', avg)")
        if find(request, r"readings: \["):
            return code_reply("check whether a calibration corrected them.", f"print(calibration_log(sensor='{sensor}'))")
        return fetch_step(request, f"fetch the readings of {sensor}.",
                          f"readings = get_readings(sensor='{sensor}')\nprint('readings:', readings)", "no readings")

    agent = code_agent(policy, [get_readings, calibration], "analyst", max_steps=7)
    agent.planning_interval = 10  # one opening plan
    return agent


def build_city_loop(planted: bool, *, aqi: Sequence[tuple[str, int]] = (("Lisbon", 42), ("Porto", 38),
                                                                       ("Faro", 55))) -> Any:
    """The manager plans, then loops over the task's cities in code, asking ``air_agent`` for each; planted: the
    loop's list is written without the last city."""
    table = dict(aqi)
    air_quality = make_tool("air_quality", "Today's air quality index of a city.", {"city": string("the city")},
                            "string", lambda city: f"AQI of {city} today: {table.get(city, 0)}", flaky=True)

    def air(request: ScriptedRequest) -> Reply:
        if request.is_final_summary:
            return "no AQI"
        found = find(request, r"AQI of \w+ today: (\d+)")
        if found:
            return [Call("final_answer", {"answer": found.group(1)})]
        city = re.search(r"AQI of (\w+)", request.task)
        if city is None or errors(request) >= 3:
            return [Call("final_answer", {"answer": "unknown"})]
        return [Call("air_quality", {"city": city.group(1)})]

    worker = tool_agent(air, [air_quality], "air_agent", max_steps=4, description="Knows today's air quality.")

    def cities_of(text: str) -> list[str]:
        found = re.search(r"of ([A-Z]\w+(?:, [A-Z]\w+)* and [A-Z]\w+)", text)
        return re.split(r", | and ", found.group(1)) if found else []

    def manager(request: ScriptedRequest) -> str:
        cities = cities_of(task_of(request))
        if request.is_planning:
            return survey([f"The cities are {', '.join(cities)}."], ["Today's AQI of each city (air_agent)."],
                          ["Nothing."], ["Ask air_agent for each city in a loop.",
                                         "Report 'AQI: <city> <n>, ...' in the task's order."])
        if request.is_final_summary:
            return "no answer"
        got = find(request, r"aqi by city: (\{.+\})")
        if got:
            pairs = re.findall(r"'(\w+)': '(\d+)'", got.group(1))
            return code_reply("report the indexes.", f"final_answer('AQI: {', '.join(f'{c} {n}' for c, n in pairs)}')")
        loop = cities[:-1] if planted else cities
        return code_reply("ask air_agent for every city of the task.",
                          f"aqi = {{}}\nfor city in {loop!r}:\n"
                          "    aqi[city] = air_agent(task=f'What is the AQI of {city} today?').strip().splitlines()[-1]\n"
                          "print('aqi by city:', aqi)")

    agent = code_agent(manager, [], "manager", max_steps=4, managed=[worker])
    agent.planning_interval = 10  # one opening plan
    return agent


BUILDERS: dict[str, Callable[..., Any]] = {
    "recalibrated": build_recalibrated,
    "city_loop": build_city_loop,
}
