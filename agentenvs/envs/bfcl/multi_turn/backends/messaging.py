"""``MessagingAPI``: a direct-messaging service with a user directory and contacts.

Scenario config (every key optional)::

    {"user_directory": {"Alice": "USR001", ...}, "current_user": "USR001",
     "contacts": ["Bob"], "messages": [{"id", "sender", "receiver", "text"}, ...],
     "next_message_id": 7}
"""

from __future__ import annotations

import copy
import random
from typing import Any

_LONG_CONTEXT_SEED = 7_310_455
_FILLER_PHRASES = (
    "see you at the standup",
    "the build is green again",
    "lunch at noon?",
    "please review the draft",
    "moved the meeting to 3pm",
    "thanks for the update",
    "the client signed off",
    "new numbers are in the sheet",
)


class MessagingAPI:
    """Log in, look people up, keep contacts, send, search and delete messages."""

    def __init__(self) -> None:
        self.user_directory: dict[str, str] = {}
        self.current_user: str | None = None
        self.contacts: list[str] = []
        self.messages: list[dict[str, Any]] = []
        self.next_message_id: int = 1

    def _load_scenario(self, config: dict[str, Any], long_context: bool = False) -> None:
        self.user_directory = dict(config.get("user_directory", {}))
        self.current_user = config.get("current_user")
        self.contacts = list(config.get("contacts", []))
        self.messages = copy.deepcopy(list(config.get("messages", [])))
        used = max((int(m["id"]) for m in self.messages), default=0)
        self.next_message_id = int(config.get("next_message_id", used + 1))
        if long_context:
            self._add_filler()

    def _add_filler(self) -> None:
        rng = random.Random(_LONG_CONTEXT_SEED)
        ids = sorted(self.user_directory.values()) or ["USR900"]
        for _ in range(60):
            sender, receiver = rng.choice(ids), rng.choice(ids)
            self.messages.append(
                {
                    "id": self.next_message_id,
                    "sender": sender,
                    "receiver": receiver,
                    "text": rng.choice(_FILLER_PHRASES),
                }
            )
            self.next_message_id += 1

    def _not_logged_in(self) -> dict[str, str] | None:
        if self.current_user is None:
            return {"error": "No user is logged in; call messaging_login first."}
        return None

    # ---------------------------------------------------------------- tools
    def messaging_login(self, user_id: str) -> dict[str, Any]:
        """Log in as the user with ``user_id``."""
        if user_id not in self.user_directory.values():
            return {"error": f"Unknown user id '{user_id}'."}
        self.current_user = user_id
        return {"login_status": True, "message": f"Logged in as {user_id}."}

    def messaging_logout(self) -> dict[str, Any]:
        """Log the current user out."""
        if self.current_user is None:
            return {"error": "No user is logged in."}
        self.current_user = None
        return {"logout_status": True}

    def list_users(self) -> dict[str, list[str]]:
        """Every user name in the directory."""
        return {"users": sorted(self.user_directory)}

    def get_user_id(self, user_name: str) -> dict[str, str]:
        """The id of the user called ``user_name``."""
        if user_name not in self.user_directory:
            return {"error": f"No user named '{user_name}'."}
        return {"user_id": self.user_directory[user_name]}

    def add_contact(self, user_name: str) -> dict[str, Any]:
        """Add a user of the directory to the contact list."""
        if user_name not in self.user_directory:
            return {"error": f"No user named '{user_name}'."}
        if user_name in self.contacts:
            return {"error": f"'{user_name}' is already a contact."}
        self.contacts.append(user_name)
        return {"added_status": True, "user_id": self.user_directory[user_name]}

    def send_message(self, receiver_id: str, message: str) -> dict[str, Any]:
        """Send ``message`` to the user with ``receiver_id`` from the logged-in user."""
        if error := self._not_logged_in():
            return error
        if receiver_id not in self.user_directory.values():
            return {"error": f"Unknown receiver id '{receiver_id}'."}
        message_id = self.next_message_id
        self.messages.append(
            {
                "id": message_id,
                "sender": self.current_user,
                "receiver": receiver_id,
                "text": message,
            }
        )
        self.next_message_id += 1
        return {"sent_status": True, "message_id": message_id}

    def view_sent_messages(self) -> dict[str, Any]:
        """The logged-in user's sent messages, grouped by receiver id."""
        if error := self._not_logged_in():
            return error
        sent: dict[str, list[str]] = {}
        for m in self.messages:
            if m["sender"] == self.current_user:
                sent.setdefault(m["receiver"], []).append(m["text"])
        return {"sent_messages": sent}

    def view_inbox(self) -> dict[str, Any]:
        """Messages received by the logged-in user, oldest first."""
        if error := self._not_logged_in():
            return error
        inbox = [
            {"id": m["id"], "sender": m["sender"], "text": m["text"]}
            for m in self.messages
            if m["receiver"] == self.current_user
        ]
        return {"inbox": inbox}

    def search_messages(self, keyword: str) -> dict[str, Any]:
        """Messages sent or received by the logged-in user whose text contains ``keyword`` (any case)."""
        if error := self._not_logged_in():
            return error
        needle = keyword.lower()
        hits = [
            dict(m)
            for m in self.messages
            if self.current_user in (m["sender"], m["receiver"]) and needle in m["text"].lower()
        ]
        return {"results": hits}

    def delete_message(self, message_id: int) -> dict[str, Any]:
        """Delete a message the logged-in user sent."""
        if error := self._not_logged_in():
            return error
        for i, m in enumerate(self.messages):
            if m["id"] == message_id:
                if m["sender"] != self.current_user:
                    return {"error": f"Message {message_id} was not sent by you."}
                del self.messages[i]
                return {"deleted_status": True, "message_id": message_id}
        return {"error": f"No message with id {message_id}."}
