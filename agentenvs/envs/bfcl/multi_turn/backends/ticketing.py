"""``TicketingAPI``: a support-ticket service (open, look up, edit, resolve, close).

Scenario config (every key optional)::

    {"current_user": "alice", "tickets": [{"id", "title", "description", "priority",
     "status", "created_by", "resolution"}, ...], "next_ticket_id": 3}
"""

from __future__ import annotations

import copy
import random
from typing import Any

_LONG_CONTEXT_SEED = 5_550_123
_FILLER_TITLES = (
    "Printer offline",
    "VPN drops",
    "Password reset",
    "Laptop battery",
    "Email quota",
    "Slow build server",
    "Badge not working",
)
_EDITABLE = ("title", "description", "priority", "status")
_STATUSES = ("open", "in_progress", "resolved", "closed")


class TicketingAPI:
    """Tickets belong to their creator; only a logged-in user can open or change them."""

    def __init__(self) -> None:
        self.current_user: str | None = None
        self.tickets: list[dict[str, Any]] = []
        self.next_ticket_id: int = 1

    def _load_scenario(self, config: dict[str, Any], long_context: bool = False) -> None:
        self.current_user = config.get("current_user")
        self.tickets = copy.deepcopy(list(config.get("tickets", [])))
        used = max((int(t["id"]) for t in self.tickets), default=0)
        self.next_ticket_id = int(config.get("next_ticket_id", used + 1))
        if long_context:
            self._add_filler()

    def _add_filler(self) -> None:
        rng = random.Random(_LONG_CONTEXT_SEED)
        for _ in range(50):
            self.tickets.append(
                {
                    "id": self.next_ticket_id,
                    "title": rng.choice(_FILLER_TITLES),
                    "description": f"Reported from desk {rng.randint(100, 999)}.",
                    "priority": rng.randint(1, 5),
                    "status": rng.choice(_STATUSES),
                    "created_by": rng.choice(["ops_bot", "helpdesk", "intern"]),
                    "resolution": "",
                }
            )
            self.next_ticket_id += 1

    def _find(self, ticket_id: int) -> dict[str, Any] | None:
        for ticket in self.tickets:
            if ticket["id"] == ticket_id:
                return ticket
        return None

    def _owned(self, ticket_id: int) -> tuple[dict[str, Any] | None, dict[str, str] | None]:
        if self.current_user is None:
            return None, {"error": "No user is logged in; call ticket_login first."}
        ticket = self._find(ticket_id)
        if ticket is None:
            return None, {"error": f"Ticket {ticket_id} not found."}
        if ticket["created_by"] != self.current_user:
            return None, {"error": f"Ticket {ticket_id} belongs to another user."}
        return ticket, None

    # ---------------------------------------------------------------- tools
    def ticket_login(self, username: str) -> dict[str, Any]:
        """Log in to the ticket service."""
        if not username:
            return {"error": "A username is required."}
        self.current_user = username
        return {"login_status": True}

    def ticket_logout(self) -> dict[str, Any]:
        """Log out of the ticket service."""
        if self.current_user is None:
            return {"error": "No user is logged in."}
        self.current_user = None
        return {"logout_status": True}

    def open_ticket(self, title: str, description: str = "", priority: int = 1) -> dict[str, Any]:
        """Open a ticket (priority 1, lowest, to 5, highest) as the logged-in user."""
        if self.current_user is None:
            return {"error": "No user is logged in; call ticket_login first."}
        if not isinstance(priority, int) or isinstance(priority, bool) or not 1 <= priority <= 5:
            return {"error": "priority must be an integer from 1 to 5."}
        ticket = {
            "id": self.next_ticket_id,
            "title": title,
            "description": description,
            "priority": priority,
            "status": "open",
            "created_by": self.current_user,
            "resolution": "",
        }
        self.tickets.append(ticket)
        self.next_ticket_id += 1
        return dict(ticket)

    def get_ticket(self, ticket_id: int) -> dict[str, Any]:
        """The ticket with ``ticket_id``."""
        ticket = self._find(ticket_id)
        if ticket is None:
            return {"error": f"Ticket {ticket_id} not found."}
        return dict(ticket)

    def list_tickets(self, status: str | None = None) -> dict[str, Any]:
        """Ids of the logged-in user's tickets, optionally only those with ``status``."""
        if self.current_user is None:
            return {"error": "No user is logged in; call ticket_login first."}
        ids = [
            t["id"]
            for t in self.tickets
            if t["created_by"] == self.current_user and (status is None or t["status"] == status)
        ]
        return {"ticket_ids": ids}

    def edit_ticket(self, ticket_id: int, updates: dict[str, Any]) -> dict[str, Any]:
        """Change a ticket's title, description, priority or status."""
        ticket, error = self._owned(ticket_id)
        if error:
            return error
        assert ticket is not None
        if not isinstance(updates, dict) or not updates:
            return {"error": "updates must be a non-empty object."}
        unknown = sorted(set(updates) - set(_EDITABLE))
        if unknown:
            return {"error": f"Fields {unknown} cannot be edited; editable: {list(_EDITABLE)}."}
        if "status" in updates and updates["status"] not in _STATUSES:
            return {"error": f"status must be one of {list(_STATUSES)}."}
        ticket.update(updates)
        return {"status": f"Ticket {ticket_id} updated."}

    def resolve_ticket(self, ticket_id: int, resolution: str) -> dict[str, Any]:
        """Mark a ticket resolved, with how it was resolved."""
        ticket, error = self._owned(ticket_id)
        if error:
            return error
        assert ticket is not None
        if ticket["status"] in ("resolved", "closed"):
            return {"error": f"Ticket {ticket_id} is already {ticket['status']}."}
        ticket["status"] = "resolved"
        ticket["resolution"] = resolution
        return {"status": f"Ticket {ticket_id} resolved."}

    def close_ticket(self, ticket_id: int) -> dict[str, Any]:
        """Close a ticket."""
        ticket, error = self._owned(ticket_id)
        if error:
            return error
        assert ticket is not None
        if ticket["status"] == "closed":
            return {"error": f"Ticket {ticket_id} is already closed."}
        ticket["status"] = "closed"
        return {"status": f"Ticket {ticket_id} closed."}
