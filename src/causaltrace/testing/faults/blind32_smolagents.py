"""Six smolagents teams written blind to the attribution, each with ONE planted decisive error and its twin.

Every team is an ordinary smolagents setup (tools with docstrings, ToolCallingAgent / CodeAgent, managers with
managed agents) driven by reactive scripted models (:class:`causaltrace.testing.smolagents.ScriptedModel`): each
reply is a function of the request, so a corrected step changes what the agents do downstream. Each run also holds
a recovered tool error (a badly formatted argument the tool rejects, then the agent retries correctly).

The teams (``build_<team>(fail=True)`` plants the error, ``fail=False`` is the successful twin):

* :func:`build_crm_lookup` — ToolCallingAgent, ``wrong_entity``: two customers share a name; the agent takes the
  first search hit instead of the one in the city the task names.
* :func:`build_order_stats` — CodeAgent, ``ignored_instruction``: the average order value keeps the cancelled
  orders the task said to exclude.
* :func:`build_reorder` — manager CodeAgent with two managed ToolCallingAgents, ``wrong_tool_argument``: the
  manager transposes two digits of the SKU when it delegates the quote.
* :func:`build_trip_budget` — manager ToolCallingAgent with a ToolCallingAgent and a CodeAgent,
  ``premature_termination``: the manager answers after the flight alone, before the hotel was priced.
* :func:`build_invoice_total` — CodeAgent, ``wrong_unit``: the invoice amounts are in cents and the code reports
  their sum as dollars.
* :func:`build_stock_reservation` — ToolCallingAgent, ``stale_value``: after reserving units the agent reports the
  availability it read before the reservation.

smolagents is imported when a team is built, not when this module is imported.
"""

from __future__ import annotations

import json
import re
from typing import Any

from causaltrace.testing.smolagents import Call, Reply, ScriptedRequest

__all__ = [
    "CRM_TASK",
    "INVOICE_TASK",
    "ORDERS_TASK",
    "REORDER_TASK",
    "STOCK_TASK",
    "TRIP_TASK",
    "build_crm_lookup",
    "build_invoice_total",
    "build_order_stats",
    "build_reorder",
    "build_stock_reservation",
    "build_trip_budget",
]

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_MANAGED = re.compile(r"managed agent '(?P<name>\w+)':\s*(?P<text>.*)", re.DOTALL)


def _model(policy: Any, name: str) -> Any:
    from causaltrace.testing.smolagents import ScriptedModel

    return ScriptedModel(policy, model_id=f"scripted-{name}")


def _last(request: ScriptedRequest) -> str:
    """The latest observation (tool result or error) of the current task, or ''."""
    observations = request.observations
    return observations[-1] if observations else ""


def _reports(request: ScriptedRequest) -> dict[str, str]:
    """What each managed agent reported in this task's observations: ``{name: text}``."""
    found: dict[str, str] = {}
    for text in request.observations:
        for part in text.split("Here is the final answer from your ")[1:]:
            match = _MANAGED.search(part)
            if match:
                found[match.group("name")] = match.group("text").strip()
    return found


def _code(thought: str, code: str) -> str:
    return f"Thought: {thought}\n<code>\n{code}\n</code>"


# ------------------------------------------------------------------------------------ 1. CRM lookup (wrong_entity)

CRM_TASK = ("What is the outstanding balance of Whitfield, Dana — the customer based in Denver? Answer with the "
            "amount in USD as a plain number with two decimals.")
_CUSTOMERS = (
    {"id": "C-1042", "name": "Dana Whitfield", "city": "Portland", "balance": 310.00},
    {"id": "C-2317", "name": "Dana Whitfield", "city": "Denver", "balance": 1875.25},
    {"id": "C-0977", "name": "Dan Whitfield", "city": "Denver", "balance": 42.10},
)


def _crm_tools() -> list[Any]:
    from smolagents import tool

    @tool
    def search_customers(name: str) -> str:
        """Search the CRM for customers with exactly this name; returns a JSON list of {id, name, city}.

        Args:
            name: the full name written as 'First Last'.
        """
        if "," in name:
            raise ValueError(f"no customer matches {name!r}: search by the full name written as 'First Last'")
        hits = [{k: c[k] for k in ("id", "name", "city")} for c in _CUSTOMERS if c["name"].lower() == name.lower()]
        return json.dumps(hits)

    @tool
    def get_balance(customer_id: str) -> str:
        """The outstanding balance of a customer account, in USD.

        Args:
            customer_id: the CRM id of the customer, such as 'C-1042'.
        """
        for c in _CUSTOMERS:
            if c["id"] == customer_id:
                return f"{customer_id}: outstanding balance {c['balance']:.2f} USD"
        raise KeyError(f"unknown customer id {customer_id!r}")

    return [search_customers, get_balance]


def crm_policy(*, fail: bool) -> Any:
    """Search the name as the task writes it, reorder it after the tool's complaint, pick a hit (``fail``: the
    first one; else the one in the task's city), read its balance and answer with it."""

    def policy(request: ScriptedRequest) -> Reply:
        task, last = request.task, _last(request)
        written = re.search(r"balance of ([A-Z][a-z]+), ([A-Z][a-z]+)", task)
        if written is None:
            return [Call("final_answer", {"answer": "I cannot find a customer name in the task."})]
        surname, first = written.groups()
        if not request.observations:
            return [Call("search_customers", {"name": f"{surname}, {first}"})]
        if "First Last" in last:
            return [Call("search_customers", {"name": f"{first} {surname}"})]
        hits = re.search(r"\[.*\]", last, re.DOTALL)
        if hits is not None and "outstanding balance" not in last:
            matches = json.loads(hits.group(0))
            if not matches:
                return [Call("final_answer", {"answer": "No such customer."})]
            chosen = matches[0] if fail else next((m for m in matches if m["city"] in task), matches[0])
            return [Call("get_balance", {"customer_id": chosen["id"]})]
        balance = re.search(r"outstanding balance (\d+\.\d\d)", last)
        if balance is not None:
            return [Call("final_answer", {"answer": balance.group(1)})]
        return [Call("final_answer", {"answer": "I could not read the balance."})]

    return policy


def build_crm_lookup(*, fail: bool = True) -> Any:
    """A ToolCallingAgent answering a balance question from the CRM (``fail``: it picks the wrong namesake)."""
    from smolagents import ToolCallingAgent

    return ToolCallingAgent(tools=_crm_tools(), model=_model(crm_policy(fail=fail), "crm"), name="crm_assistant",
                            max_steps=6)


# -------------------------------------------------------------------------------- 2. order stats (ignored_instruction)

ORDERS_TASK = ("Using the order export for March 2025, compute the average order value in USD, excluding cancelled "
               "orders. Answer with the number only, rounded to 2 decimals.")
_ORDERS = (
    {"id": "O-301", "status": "completed", "total": 120.00},
    {"id": "O-302", "status": "cancelled", "total": 980.00},
    {"id": "O-303", "status": "completed", "total": 75.50},
    {"id": "O-304", "status": "shipped", "total": 210.00},
    {"id": "O-305", "status": "completed", "total": 64.25},
    {"id": "O-306", "status": "cancelled", "total": 455.00},
    {"id": "O-307", "status": "shipped", "total": 130.25},
)


def _orders_tools() -> list[Any]:
    from smolagents import tool

    @tool
    def fetch_orders(month: str) -> list:
        """All orders placed in a month, as a list of dicts with the keys 'id', 'status' and 'total' (USD).

        Args:
            month: the month written as 'YYYY-MM', e.g. '2025-03'.
        """
        if not re.fullmatch(r"\d{4}-\d{2}", month):
            raise ValueError(f"bad month {month!r}: write it as 'YYYY-MM', e.g. '2025-03'")
        return [dict(o) for o in _ORDERS] if month == "2025-03" else []

    return [fetch_orders]


def orders_policy(*, fail: bool) -> Any:
    """Fetch the month as written, fix its format after the error, look at the statuses, compute the average
    (``fail``: over every order, the cancelled ones included), then answer with the printed value."""

    def policy(request: ScriptedRequest) -> str:
        if request.is_final_summary:
            return "I could not compute the average."
        last = _last(request)
        if not request.observations:
            return _code("I will load the March 2025 orders.",
                         'orders = fetch_orders(month="March 2025")\nprint(orders[:2])')
        if "YYYY-MM" in last:
            return _code("The tool wants the month as YYYY-MM; I will retry and look at the statuses.",
                         'orders = fetch_orders(month="2025-03")\n'
                         'print(len(orders), "orders; statuses:", sorted(set(o["status"] for o in orders)))')
        if "statuses:" in last:
            if fail:
                body = 'average = round(sum(o["total"] for o in orders) / len(orders), 2)'
            else:
                body = ('kept = [o for o in orders if o["status"] != "cancelled"]\n'
                        'average = round(sum(o["total"] for o in kept) / len(kept), 2)')
            return _code("Now the average order value.", body + '\nprint("average order value:", average)')
        value = re.search(r"average order value: (-?\d+(?:\.\d+)?)", last)
        if value is not None:
            return _code("I have the average.", f'final_answer("{float(value.group(1)):.2f}")')
        return _code("Something unexpected happened.", 'final_answer("unknown")')

    return policy


def build_order_stats(*, fail: bool = True) -> Any:
    """A CodeAgent computing the average order value of a month (``fail``: the cancelled orders stay in)."""
    from smolagents import CodeAgent

    return CodeAgent(tools=_orders_tools(), model=_model(orders_policy(fail=fail), "orders"), name="analyst",
                     max_steps=6)


# --------------------------------------------------------------------------- 3. reorder (wrong_tool_argument)

REORDER_TASK = ("Inventory check for SKU KB-4471 (wireless keyboard): find how many units we must order to bring it "
                "back to its target stock level, then get the supplier's quote for exactly that quantity. Answer "
                "with the quote total in USD (number only, two decimals).")
_STOCK = {"KB-4471": (38, 120), "KB-4417": (260, 200)}
_PRICES = {"KB-4471": ("wireless keyboard", 41.90), "KB-4417": ("keyboard tray", 18.40)}


def _stock_tools() -> list[Any]:
    from smolagents import tool

    @tool
    def get_stock(sku: str) -> str:
        """Units on hand and the target stock level of a product.

        Args:
            sku: the product's SKU, such as 'KB-4471'.
        """
        if sku not in _STOCK:
            raise KeyError(f"unknown SKU {sku!r}: SKUs look like 'KB-4471'")
        on_hand, target = _STOCK[sku]
        return f"{sku}: on_hand={on_hand}, target={target}"

    return [get_stock]


def _supplier_tools() -> list[Any]:
    from smolagents import tool

    @tool
    def supplier_quote(sku: str, quantity: int) -> str:
        """The supplier's price quote for a quantity of one product.

        Args:
            sku: the product's SKU, such as 'KB-4471'.
            quantity: how many units to order.
        """
        if sku not in _PRICES:
            raise KeyError(f"the supplier does not sell {sku!r}")
        name, unit = _PRICES[sku]
        return f"quote: {quantity} x {sku} ({name}) at {unit:.2f} = {quantity * unit:.2f} USD"

    return [supplier_quote]


def stock_worker_policy(request: ScriptedRequest) -> Reply:
    """The stock agent: look the SKU up (first by its bare number, then as the tool asks), report the two levels."""
    task, last = request.task, _last(request)
    sku = re.search(r"SKU ([A-Z]{2})-(\d+)", task)
    if sku is None:
        return [Call("final_answer", {"answer": "no SKU given"})]
    if not request.observations:
        return [Call("get_stock", {"sku": sku.group(2)})]
    if "look like" in last:
        return [Call("get_stock", {"sku": f"{sku.group(1)}-{sku.group(2)}"})]
    levels = re.search(r"on_hand=(\d+), target=(\d+)", last)
    if levels is not None:
        return [Call("final_answer", {"answer": f"on hand {levels.group(1)} units, target {levels.group(2)} units"})]
    return [Call("final_answer", {"answer": "the stock lookup failed"})]


def supplier_worker_policy(request: ScriptedRequest) -> Reply:
    """The supplier agent: ask for the quote of the SKU and quantity its task names, answer with the total."""
    task, last = request.task, _last(request)
    wanted = re.search(r"(\d+) units of SKU ([A-Z]{2}-\d+)", task)
    if wanted is None:
        return [Call("final_answer", {"answer": "no quantity and SKU given"})]
    total = re.search(r"= (\d+\.\d\d) USD", last)
    if total is not None:
        return [Call("final_answer", {"answer": total.group(1)})]
    if len(request.observations) >= 2:
        return [Call("final_answer", {"answer": "the quote failed"})]
    return [Call("supplier_quote", {"sku": wanted.group(2), "quantity": int(wanted.group(1))})]


def reorder_manager_policy(*, fail: bool) -> Any:
    """The manager CodeAgent: ask the stock agent for the levels, delegate the quote of the shortfall to the
    supplier agent (``fail``: with two digits of the SKU swapped), answer with the quoted total."""

    def policy(request: ScriptedRequest) -> str:
        if request.is_final_summary:
            return "I could not get a quote."
        reports, task = _reports(request), request.task
        sku = re.search(r"SKU ([A-Z]{2}-\d+)", task)
        if sku is None:
            return _code("No SKU in the task.", 'final_answer("no SKU given")')
        code = sku.group(1)
        if "supplier_agent" in reports:
            total = _NUMBER.search(reports["supplier_agent"])
            answer = f"{float(total.group(0)):.2f}" if total else "unknown"
            return _code("The supplier quoted the reorder.", f'final_answer("{answer}")')
        if "stock_agent" in reports:
            levels = re.search(r"on hand (\d+) units, target (\d+) units", reports["stock_agent"])
            if levels is None:
                return _code("The stock agent gave no levels.", 'final_answer("unknown")')
            need = int(levels.group(2)) - int(levels.group(1))
            typed = code[:-2] + code[-1] + code[-2] if fail else code
            return _code(f"We need {need} units; I will ask the supplier agent for the quote.",
                         f'quote = supplier_agent(task="Get the supplier quote for {need} units of SKU {typed}.")\n'
                         "print(quote)")
        return _code("First I need the stock levels.",
                     f'levels = stock_agent(task="Report the units on hand and the target stock level of SKU '
                     f'{code}.")\nprint(levels)')

    return policy


def build_reorder(*, fail: bool = True) -> Any:
    """A manager CodeAgent with two managed ToolCallingAgents: stock, then supplier (``fail``: SKU typo)."""
    from smolagents import CodeAgent, ToolCallingAgent

    stock = ToolCallingAgent(tools=_stock_tools(), model=_model(stock_worker_policy, "stock"), name="stock_agent",
                             description="Looks up the units on hand and the target stock level of a SKU.",
                             max_steps=4)
    supplier = ToolCallingAgent(tools=_supplier_tools(), model=_model(supplier_worker_policy, "supplier"),
                                name="supplier_agent",
                                description="Gets the supplier's price quote for a quantity of a SKU.", max_steps=4)
    return CodeAgent(tools=[], model=_model(reorder_manager_policy(fail=fail), "purchasing"),
                     managed_agents=[stock, supplier], name="purchasing_manager", max_steps=6)


# ------------------------------------------------------------------------ 4. trip budget (premature_termination)

TRIP_TASK = ("Budget check for a trip from Boston to Chicago, leaving 2025-10-14 and returning 2025-10-17: find the "
             "cheapest round-trip flight and the cheapest hotel for the 3 nights, and answer with the total cost in "
             "USD (number only).")
_AIRPORTS = {"BOS", "ORD", "MDW", "JFK"}
_FLIGHTS = ({"flight": "UA 1432", "price": 312}, {"flight": "AA 2210", "price": 248}, {"flight": "B6 917", "price": 289})
_HOTELS = ({"name": "Lakeview Inn", "price_per_night": 179}, {"name": "Loop Suites", "price_per_night": 139},
           {"name": "Grand Wacker", "price_per_night": 265})


def _flight_tools() -> list[Any]:
    from smolagents import tool

    @tool
    def search_flights(origin: str, destination: str, depart: str, return_date: str) -> str:
        """Round-trip flight offers as a JSON list of {flight, price} (USD, per person).

        Args:
            origin: the IATA code of the departure airport, such as 'BOS'.
            destination: the IATA code of the arrival airport, such as 'ORD'.
            depart: the departure date, YYYY-MM-DD.
            return_date: the return date, YYYY-MM-DD.
        """
        for code in (origin, destination):
            if code not in _AIRPORTS:
                raise ValueError(f"unknown airport {code!r}: use IATA codes such as BOS or ORD")
        return json.dumps(list(_FLIGHTS))

    return [search_flights]


def _hotel_tools() -> list[Any]:
    from smolagents import tool

    @tool
    def find_hotels(city: str, check_in: str, nights: int) -> list:
        """Hotels with a free room, as a list of dicts {name, price_per_night} (USD).

        Args:
            city: the city name.
            check_in: the arrival date, YYYY-MM-DD.
            nights: the number of nights.
        """
        return [dict(h) for h in _HOTELS]

    return [find_hotels]


def flights_worker_policy(request: ScriptedRequest) -> Reply:
    """The flights agent: search with the city names first, with the airport codes after the tool's complaint,
    answer with the cheapest price."""
    task, last = request.task, _last(request)
    dates = re.findall(r"\d{4}-\d{2}-\d{2}", task)
    if len(dates) < 2:
        return [Call("final_answer", {"answer": "the task gives no dates"})]
    if not request.observations:
        return [Call("search_flights", {"origin": "Boston", "destination": "Chicago", "depart": dates[0],
                                        "return_date": dates[1]})]
    if "IATA" in last:
        return [Call("search_flights", {"origin": "BOS", "destination": "ORD", "depart": dates[0],
                                        "return_date": dates[1]})]
    offers = re.search(r"\[.*\]", last, re.DOTALL)
    if offers is not None:
        cheapest = min(json.loads(offers.group(0)), key=lambda o: o["price"])
        return [Call("final_answer", {"answer": str(cheapest["price"])})]
    return [Call("final_answer", {"answer": "no flight found"})]


def hotels_worker_policy(request: ScriptedRequest) -> str:
    """The hotels CodeAgent: list the hotels, print the cheapest stay's total, answer with it."""
    last = _last(request)
    if request.is_final_summary:
        return "no hotel found"
    stay = re.search(r"cheapest stay: .* (\d+)\s*$", last, re.MULTILINE)
    if stay is not None:
        return _code("I have the cheapest stay.", f'final_answer("{stay.group(1)}")')
    nights = re.search(r"(\d+) nights", request.task)
    count = nights.group(1) if nights else "1"
    check_in = re.search(r"\d{4}-\d{2}-\d{2}", request.task)
    return _code("I will list the hotels and take the cheapest.",
                 f'hotels = find_hotels(city="Chicago", check_in="{check_in.group(0) if check_in else ""}", '
                 f"nights={count})\n"
                 'best = min(hotels, key=lambda h: h["price_per_night"])\n'
                 f'print("cheapest stay:", best["name"], best["price_per_night"] * {count})')


def trip_manager_policy(*, fail: bool) -> Any:
    """The manager ToolCallingAgent: flights first, then (``fail``: not — it answers with the flight price alone)
    the hotel, then the sum."""

    def policy(request: ScriptedRequest) -> Reply:
        task, reports = request.task, _reports(request)
        dates = re.findall(r"\d{4}-\d{2}-\d{2}", task)
        if len(dates) < 2:
            return [Call("final_answer", {"answer": "the task gives no dates"})]
        values = {name: _NUMBER.search(text) for name, text in reports.items()}
        if values.get("flights_agent") is None:
            return [Call("flights_agent", {"task": f"Find the cheapest round-trip flight from Boston to Chicago, "
                                                   f"leaving {dates[0]} and returning {dates[1]}. Answer with the "
                                                   "price in USD."})]
        flight = float(values["flights_agent"].group(0))
        if values.get("hotels_agent") is None:
            if fail:
                return [Call("final_answer", {"answer": f"{flight:g}"})]
            return [Call("hotels_agent", {"task": f"Find the cheapest hotel in Chicago for 3 nights, checking in "
                                                  f"on {dates[0]}. Answer with the total price of the stay in USD."})]
        return [Call("final_answer", {"answer": f"{flight + float(values['hotels_agent'].group(0)):g}"})]

    return policy


def build_trip_budget(*, fail: bool = True) -> Any:
    """A manager ToolCallingAgent with a flights ToolCallingAgent and a hotels CodeAgent (``fail``: it stops after
    the flight)."""
    from smolagents import CodeAgent, ToolCallingAgent

    flights = ToolCallingAgent(tools=_flight_tools(), model=_model(flights_worker_policy, "flights"),
                               name="flights_agent", description="Finds round-trip flight offers and prices.",
                               max_steps=4)
    hotels = CodeAgent(tools=_hotel_tools(), model=_model(hotels_worker_policy, "hotels"), name="hotels_agent",
                       description="Finds hotels in a city and prices a stay.", max_steps=4)
    return ToolCallingAgent(tools=[], model=_model(trip_manager_policy(fail=fail), "travel"),
                            managed_agents=[flights, hotels], name="travel_planner", max_steps=6)


# ------------------------------------------------------------------------------ 5. invoice total (wrong_unit)

INVOICE_TASK = ("What is the total amount due, in USD, on invoices INV-201, INV-202 and INV-203? Answer with the "
                "number only, two decimals.")
_INVOICES = {"INV-201": ("Northwind", 129950), "INV-202": ("Contoso", 48725), "INV-203": ("Fabrikam", 310000)}


def _invoice_tools() -> list[Any]:
    from smolagents import tool

    @tool
    def get_invoice(invoice_id: str) -> dict:
        """One invoice from the billing system: {'id', 'customer', 'amount_due', 'unit', 'currency'}.

        Args:
            invoice_id: the invoice number, such as 'INV-201'.
        """
        if not str(invoice_id).startswith("INV-"):
            raise ValueError(f"bad invoice id {invoice_id!r}: invoice ids look like 'INV-201'")
        customer, cents = _INVOICES[invoice_id]
        return {"id": invoice_id, "customer": customer, "amount_due": cents, "unit": "cents", "currency": "USD"}

    return [get_invoice]


def invoice_policy(*, fail: bool) -> Any:
    """Fetch the invoices by their bare numbers, fix the ids after the error and print them, sum the amounts
    (``fail``: the cents are reported as dollars), then answer with the printed total."""

    def policy(request: ScriptedRequest) -> str:
        if request.is_final_summary:
            return "I could not total the invoices."
        numbers = re.findall(r"INV-(\d+)", request.task)
        last = _last(request)
        if not request.observations:
            return _code("I will fetch the three invoices.",
                         f"invoices = [get_invoice(invoice_id=n) for n in {numbers!r}]\nprint(invoices)")
        if "look like 'INV-" in last:
            return _code("The ids need their INV- prefix.",
                         f'invoices = [get_invoice(invoice_id="INV-" + n) for n in {numbers!r}]\n'
                         "for inv in invoices:\n    print(inv)")
        if "amount_due" in last:
            total = 'sum(inv["amount_due"] for inv in invoices)' + ("" if fail else " / 100")
            return _code("Now the total due.", f"total = {total}\n" + 'print(f"total due: {total:.2f}")')
        value = re.search(r"total due: (\d+\.\d\d)", last)
        if value is not None:
            return _code("I have the total.", f'final_answer("{value.group(1)}")')
        return _code("Something unexpected happened.", 'final_answer("unknown")')

    return policy


def build_invoice_total(*, fail: bool = True) -> Any:
    """A CodeAgent totalling invoices (``fail``: amounts in cents reported as dollars)."""
    from smolagents import CodeAgent

    return CodeAgent(tools=_invoice_tools(), model=_model(invoice_policy(fail=fail), "billing"), name="billing_clerk",
                     max_steps=6)


# ------------------------------------------------------------------------- 6. stock reservation (stale_value)

STOCK_TASK = ("Reserve 4 units of the Trailblazer 2 tent for sales order SO-5531, then tell me how many units of it "
              "remain available. Answer with the number only.")


def _reservation_tools() -> list[Any]:
    from smolagents import tool

    stock = {"Trailblazer 2": 17}

    @tool
    def check_availability(product: str) -> str:
        """How many units of a product are available to reserve.

        Args:
            product: the product name, such as 'Trailblazer 2'.
        """
        return f"{product}: available {stock.get(product, 0)}"

    @tool
    def reserve(product: str, quantity: int, order_id: str) -> str:
        """Reserve units of a product for a sales order; returns the availability after the reservation.

        Args:
            product: the product name.
            quantity: how many units to reserve.
            order_id: the sales order, such as 'SO-5531'.
        """
        if not order_id.startswith("SO-"):
            raise ValueError(f"unknown order {order_id!r}: sales order ids look like 'SO-5531'")
        if stock.get(product, 0) < quantity:
            raise ValueError(f"only {stock.get(product, 0)} units of {product} are available")
        stock[product] -= quantity
        return f"reserved {quantity} x {product} for {order_id}; available now {stock[product]}"

    return [check_availability, reserve]


def reservation_policy(*, fail: bool) -> Any:
    """Check availability, reserve (first with the order's bare number), then answer (``fail``: with the
    availability read before the reservation)."""

    def policy(request: ScriptedRequest) -> Reply:
        task, observations = request.task, request.observations
        wanted = re.search(r"Reserve (\d+) units of the (.+?) tent for sales order SO-(\d+)", task)
        if wanted is None:
            return [Call("final_answer", {"answer": "I could not read the reservation request."})]
        quantity, product, order = int(wanted.group(1)), wanted.group(2), wanted.group(3)
        if not observations:
            return [Call("check_availability", {"product": product})]
        last = observations[-1]
        if "available now" in last:
            before = re.search(r"available (\d+)", observations[0])
            after = re.search(r"available now (\d+)", last)
            value = before if fail and before is not None else after
            return [Call("final_answer", {"answer": value.group(1) if value else "unknown"})]
        if "look like 'SO-" in last:
            return [Call("reserve", {"product": product, "quantity": quantity, "order_id": f"SO-{order}"})]
        if re.search(r"available \d+", last):
            return [Call("reserve", {"product": product, "quantity": quantity, "order_id": order})]
        return [Call("final_answer", {"answer": "the reservation failed"})]

    return policy


def build_stock_reservation(*, fail: bool = True) -> Any:
    """A ToolCallingAgent reserving stock (``fail``: it reports the availability from before the reservation)."""
    from smolagents import ToolCallingAgent

    return ToolCallingAgent(tools=_reservation_tools(), model=_model(reservation_policy(fail=fail), "warehouse"),
                            name="warehouse_assistant", max_steps=6)
