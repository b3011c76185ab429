"""The multi-turn BFCL backends: every tool's effect and errors, long context, and docs that match."""

from __future__ import annotations

import copy
import inspect
import json
import pickle

import pytest

from agentenvs.core.tasks import task_path
from agentenvs.envs.bfcl.multi_turn.backends import BACKENDS, backend_class
from agentenvs.envs.bfcl.multi_turn.backends.file_system import FileSystemAPI
from agentenvs.envs.bfcl.multi_turn.backends.messaging import MessagingAPI
from agentenvs.envs.bfcl.multi_turn.backends.ticketing import TicketingAPI
from agentenvs.envs.bfcl.multi_turn.checker import public_methods, public_state


def _fs() -> FileSystemAPI:
    fs = FileSystemAPI()
    fs._load_scenario(
        {
            "tree": {
                "work": {
                    "a.txt": "one\ntwo\nthree",
                    "b.txt": "one\n2\nthree",
                    ".hidden": "h",
                    "sub": {},
                }
            },
            "cwd": "/work",
        }
    )
    return fs


def test_file_system_navigation() -> None:
    fs = _fs()
    assert fs.pwd() == {"current_working_directory": "/work"}
    assert fs.ls() == {"current_directory_content": ["a.txt", "b.txt", "sub"]}
    assert ".hidden" in fs.ls(a=True)["current_directory_content"]
    assert fs.cd(folder="sub") == {"current_working_directory": "/work/sub"}
    assert fs.cd(folder="..")["current_working_directory"] == "/work"
    assert fs.cd(folder="/work/sub")["current_working_directory"] == "/work/sub"
    assert "error" in fs.cd(folder="nowhere")
    assert "error" in fs.cd(folder="/work/a.txt")
    assert fs.cwd == "/work/sub"


def test_file_system_create_read_write() -> None:
    fs = _fs()
    assert fs.mkdir(dir_name="new") is None
    assert isinstance(fs.tree["work"]["new"], dict)
    assert "error" in fs.mkdir(dir_name="new")
    assert "error" in fs.mkdir(dir_name="missing/child")
    assert fs.touch(file_name="empty.txt") is None and fs.tree["work"]["empty.txt"] == ""
    assert fs.touch(file_name="a.txt") is None and fs.tree["work"]["a.txt"].startswith("one")
    assert fs.echo(content="hi") == {"terminal_output": "hi"}
    assert fs.echo(content="hi", file_name="new/x.txt") is None
    assert fs.cat(file_name="new/x.txt") == {"file_content": "hi"}
    assert "error" in fs.cat(file_name="sub")
    assert "error" in fs.cat(file_name="nope")


def test_file_system_move_and_copy() -> None:
    fs = _fs()
    assert "moved" in fs.mv(source="a.txt", destination="sub")["result"]
    assert "a.txt" not in fs.tree["work"] and fs.tree["work"]["sub"]["a.txt"] == "one\ntwo\nthree"
    assert "error" in fs.mv(source="a.txt", destination="sub")  # gone from here
    assert "copied" in fs.cp(source="b.txt", destination="c.txt")["result"]
    assert fs.tree["work"]["c.txt"] == fs.tree["work"]["b.txt"]
    assert "error" in fs.cp(source="b.txt", destination="c.txt")  # exists
    assert "error" in fs.mv(source="sub", destination="sub/inner")  # into itself
    fs.cp(source="sub", destination="sub2")
    fs.tree["work"]["sub2"]["a.txt"] = "changed"
    assert fs.tree["work"]["sub"]["a.txt"] == "one\ntwo\nthree"  # a deep copy


def test_file_system_text_tools() -> None:
    fs = _fs()
    assert fs.grep(file_name="a.txt", pattern="t") == {"matching_lines": ["two", "three"]}
    assert fs.wc(file_name="a.txt") == {"count": 3, "type": "lines"}
    assert fs.wc(file_name="a.txt", mode="w")["count"] == 3
    assert fs.wc(file_name="a.txt", mode="c")["count"] == len("one\ntwo\nthree")
    assert "error" in fs.wc(file_name="a.txt", mode="x")
    assert fs.sort(file_name="a.txt") == {"sorted_content": "one\nthree\ntwo"}
    assert fs.tail(file_name="a.txt", lines=2) == {"last_lines": "two\nthree"}
    assert fs.tail(file_name="a.txt", lines=0) == {"last_lines": ""}
    assert fs.diff(file_name1="a.txt", file_name2="b.txt") == {"diff_lines": "- two\n+ 2"}
    assert fs.find(name="txt") == {"matches": ["./a.txt", "./b.txt"]}
    assert "error" in fs.find(path="nowhere")


def test_file_system_rejects_a_bad_cwd() -> None:
    with pytest.raises(ValueError, match="cwd"):
        FileSystemAPI()._load_scenario({"tree": {"a": {}}, "cwd": "/b"})


def _messaging(**overrides) -> MessagingAPI:  # noqa: ANN003
    api = MessagingAPI()
    config = {
        "user_directory": {"Alice": "USR001", "Bob": "USR002"},
        "contacts": [],
        "messages": [{"id": 1, "sender": "USR002", "receiver": "USR001", "text": "Hi Alice"}],
    }
    config.update(overrides)
    api._load_scenario(config)
    return api


def test_messaging() -> None:
    api = _messaging()
    assert api.next_message_id == 2
    assert "error" in api.send_message(receiver_id="USR002", message="x")  # not logged in
    assert "error" in api.messaging_login(user_id="USR999")
    assert api.messaging_login(user_id="USR001")["login_status"] is True
    assert api.list_users() == {"users": ["Alice", "Bob"]}
    assert api.get_user_id(user_name="Bob") == {"user_id": "USR002"}
    assert "error" in api.get_user_id(user_name="Zed")
    assert api.add_contact(user_name="Bob")["added_status"] is True
    assert "error" in api.add_contact(user_name="Bob")
    assert api.send_message(receiver_id="USR002", message="Hello Bob") == {
        "sent_status": True,
        "message_id": 2,
    }
    assert "error" in api.send_message(receiver_id="USR404", message="x")
    assert api.view_sent_messages() == {"sent_messages": {"USR002": ["Hello Bob"]}}
    assert api.view_inbox()["inbox"] == [{"id": 1, "sender": "USR002", "text": "Hi Alice"}]
    assert [m["id"] for m in api.search_messages(keyword="HELLO")["results"]] == [2]
    assert "error" in api.delete_message(message_id=1)  # not the sender
    assert api.delete_message(message_id=2)["deleted_status"] is True
    assert "error" in api.delete_message(message_id=2)
    assert api.messaging_logout()["logout_status"] is True
    assert "error" in api.messaging_logout()


def test_ticketing() -> None:
    api = TicketingAPI()
    api._load_scenario(
        {
            "tickets": [
                {
                    "id": 4,
                    "title": "t",
                    "description": "",
                    "priority": 1,
                    "status": "open",
                    "created_by": "bob",
                    "resolution": "",
                }
            ]
        }
    )
    assert api.next_ticket_id == 5
    assert "error" in api.open_ticket(title="x")
    assert "error" in api.list_tickets()
    api.ticket_login(username="alice")
    ticket = api.open_ticket(title="VPN", description="drops", priority=4)
    assert ticket["id"] == 5 and ticket["created_by"] == "alice" and ticket["status"] == "open"
    assert "error" in api.open_ticket(title="x", priority=9)
    assert "error" in api.open_ticket(title="x", priority=True)
    assert api.get_ticket(ticket_id=4)["created_by"] == "bob"
    assert "error" in api.get_ticket(ticket_id=99)
    assert api.list_tickets() == {"ticket_ids": [5]}
    assert "error" in api.close_ticket(ticket_id=4)  # bob's
    assert "error" in api.edit_ticket(ticket_id=5, updates={"owner": "x"})
    assert "error" in api.edit_ticket(ticket_id=5, updates={"status": "weird"})
    assert "error" in api.edit_ticket(ticket_id=5, updates={})
    api.edit_ticket(ticket_id=5, updates={"priority": 5, "status": "in_progress"})
    assert api.get_ticket(ticket_id=5)["priority"] == 5
    assert api.resolve_ticket(ticket_id=5, resolution="fixed") == {"status": "Ticket 5 resolved."}
    assert "error" in api.resolve_ticket(ticket_id=5, resolution="again")
    assert api.list_tickets(status="resolved") == {"ticket_ids": [5]}
    assert api.close_ticket(ticket_id=5) == {"status": "Ticket 5 closed."}
    assert "error" in api.close_ticket(ticket_id=5)
    assert api.ticket_logout()["logout_status"] is True
    assert "error" in api.ticket_logout()


@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_long_context_is_deterministic_and_bigger(name: str) -> None:
    cls = backend_class(name)
    configs = {
        "FileSystemAPI": {"tree": {"w": {"f.txt": "x"}}, "cwd": "/w"},
        "MessagingAPI": {"user_directory": {"A": "U1", "B": "U2"}},
        "TicketingAPI": {},
    }
    short, long_a, long_b = cls(), cls(), cls()
    short._load_scenario(copy.deepcopy(configs[name]))
    long_a._load_scenario(copy.deepcopy(configs[name]), long_context=True)
    long_b._load_scenario(copy.deepcopy(configs[name]), long_context=True)
    assert public_state(long_a) == public_state(long_b)
    assert len(json.dumps(public_state(long_a))) > 5 * len(json.dumps(public_state(short)))
    # public state is plain data: JSON round trip and pickling keep it equal
    assert json.loads(json.dumps(public_state(long_a))) == public_state(long_a)
    assert public_state(pickle.loads(pickle.dumps(long_a))) == public_state(long_a)


@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_docs_match_the_methods(name: str) -> None:
    cls = backend_class(name)
    path = task_path("bfcl", "multi_turn", "func_doc", f"{name}.json")
    docs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    assert sorted(d["name"] for d in docs) == list(public_methods(cls))
    for doc in docs:
        params = inspect.signature(getattr(cls, doc["name"])).parameters
        args = {p: v for p, v in params.items() if p != "self"}
        assert doc["parameters"]["type"] == "dict"
        assert set(doc["parameters"]["properties"]) == set(args), doc["name"]
        required = {p for p, v in args.items() if v.default is inspect.Parameter.empty}
        assert set(doc["parameters"]["required"]) == required, doc["name"]
