"""AutoGen's tool_description: the description of the agent's tool called ``name`` — its workbenches' tools first
(in order), then its handoff tools; none for a tool without a description or an unknown name, or when the agent's
private fields are not what AutoGen keeps there."""

from __future__ import annotations

from types import SimpleNamespace as NS

import pytest

pytest.importorskip("autogen_agentchat")

from causaltrace import semconv
from causaltrace.instrumentation.autogen._tools import tool_description


def _described(text):
    return {semconv.OI_TOOL_DESCRIPTION: text, semconv.GEN_AI_TOOL_DESCRIPTION: text}


def test_the_first_described_tool_of_that_name_wins_workbenches_before_handoffs():
    agent = NS(
        _workbench=[NS(_tools=[NS(name="add", description=""), NS(name="mul", description="Multiply.")]),
                    NS(_tools=(NS(name="add", description="Add."),))],
        _handoff_tools=[NS(name="add", description="Hand off."), NS(name="transfer", description="Transfer.")],
    )
    assert tool_description(agent, "add") == _described("Add.")
    assert tool_description(agent, "mul") == _described("Multiply.")
    assert tool_description(agent, "transfer") == _described("Transfer.")
    assert tool_description(agent, "nope") == {}


def test_fields_of_another_shape_are_no_tools():
    assert tool_description(NS(_workbench="x", _handoff_tools=(NS(name="a", description="A."),)), "a") == {}
    assert tool_description(NS(_workbench=[NS(_tools=None)]), "a") == {}
    assert tool_description(object(), "a") == {}
