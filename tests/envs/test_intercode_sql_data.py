"""InterCode-SQL task loaders: bundled, InterCode and Spider formats, and their errors."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from agentenvs.core.errors import TaskError
from agentenvs.envs.intercode_sql.data import load_tasks
from agentenvs.envs.intercode_sql.env import InterCodeSQLEnv

FIXTURES = Path(__file__).parent / "intercode_sql_fixtures"


def fixture_records() -> list[dict]:
    return [json.loads(line) for line in (FIXTURES / "tasks.jsonl").read_text().splitlines()]


def test_bundled_format() -> None:
    tasks = load_tasks(FIXTURES)
    assert list(tasks.tasks)[:2] == ["concert-001", "concert-002"]
    task = tasks.tasks["pets-002"]
    assert task.db == "pets" and task.hardness == "medium" and "pets" in task.db_tables
    assert tasks.databases["concert"].path == FIXTURES / "databases" / "concert.sql"


def test_intercode_format_numbers_ids_per_database(tmp_path: Path) -> None:
    shutil.copytree(FIXTURES / "databases", tmp_path / "databases")
    records = [{k: v for k, v in r.items() if k != "id"} for r in fixture_records()]
    path = tmp_path / "ic_spider_dev.json"
    path.write_text(json.dumps(records))
    tasks = load_tasks(path)
    assert list(tasks.tasks) == [r["id"] for r in fixture_records()]
    env = InterCodeSQLEnv(tasks_path=path)
    env.reset(seed=0, options={"task_id": "pets-001"})
    env.step(tasks.tasks["pets-001"].gold)
    assert env.step("submit")[1] == 1.0


def make_spider(root: Path) -> None:
    """A one-database Spider layout built from the concert fixture."""
    (root / "database" / "concert").mkdir(parents=True)
    conn = sqlite3.connect(root / "database" / "concert" / "concert.sqlite")
    conn.executescript((FIXTURES / "databases" / "concert.sql").read_text())
    conn.close()
    (root / "dev.json").write_text(
        json.dumps(
            [
                {
                    "db_id": "concert",
                    "question": "How many singers?",
                    "query": "SELECT count(*) FROM singer",
                },
                {"db_id": "concert", "question": "Names?", "query": "SELECT name FROM singer"},
            ]
        )
    )
    (root / "tables.json").write_text(
        json.dumps(
            [
                {
                    "db_id": "concert",
                    "table_names_original": ["singer", "concert"],
                    "column_names_original": [
                        [-1, "*"],
                        [0, "singer_id"],
                        [0, "name"],
                        [1, "concert_id"],
                    ],
                }
            ]
        )
    )


def test_spider_format(tmp_path: Path) -> None:
    make_spider(tmp_path)
    tasks = load_tasks(tmp_path)
    assert list(tasks.tasks) == ["concert-001", "concert-002"]
    assert tasks.tasks["concert-001"].db_tables == {
        "singer": ["singer_id", "name"],
        "concert": ["concert_id"],
    }
    env = InterCodeSQLEnv(tasks_path=tmp_path, show_schema=True)
    obs, _ = env.reset(seed=0, options={"task_id": "concert-001"})
    assert "- singer: singer_id, name" in obs
    env.step("SELECT count(*) FROM singer")
    assert env.step("submit")[1] == 1.0
    # writes go to the episode's memory copy, never to the .sqlite file
    env.reset(seed=0, options={"task_id": "concert-001"})
    env.step("DELETE FROM singer")
    conn = sqlite3.connect(tmp_path / "database" / "concert" / "concert.sqlite")
    assert conn.execute("SELECT count(*) FROM singer").fetchone() == (6,)
    conn.close()


def write_jsonl(path: Path, records: list) -> None:
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda r: r.pop("gold"), "gold"),
        (lambda r: r.update(query=""), "query"),
        (lambda r: r.update(hardness="trivial"), "hardness"),
        (lambda r: r.update(db_tables=["singer"]), "db_tables"),
        (lambda r: r.update(db_tables={"singer": "name"}), "db_tables"),
        (lambda r: r.update(db="nosuchdb"), "db"),
        (lambda r: r.pop("db_tables"), "db_tables"),
    ],
)
def test_malformed_bundled_records_name_file_and_field(tmp_path: Path, mutate, field) -> None:
    shutil.copytree(FIXTURES / "databases", tmp_path / "databases")
    records = fixture_records()
    mutate(records[1])
    write_jsonl(tmp_path / "tasks.jsonl", records)
    with pytest.raises(TaskError) as err:
        load_tasks(tmp_path)
    assert err.value.field == field
    assert err.value.source == f"{tmp_path / 'tasks.jsonl'}:2"


def test_malformed_files(tmp_path: Path) -> None:
    (tmp_path / "tasks.jsonl").write_text('{"id": "x"\n')
    with pytest.raises(TaskError, match="json"):
        load_tasks(tmp_path)
    (tmp_path / "tasks.jsonl").write_text("")
    with pytest.raises(TaskError, match="no tasks"):
        load_tasks(tmp_path)
    write_jsonl(tmp_path / "tasks.jsonl", [fixture_records()[0]] * 2)
    shutil.copytree(FIXTURES / "databases", tmp_path / "databases")
    with pytest.raises(TaskError, match="duplicate task id"):
        load_tasks(tmp_path)
    with pytest.raises(TaskError, match="tasks_path"):
        load_tasks(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(TaskError, match="neither tasks.jsonl"):
        load_tasks(tmp_path / "empty")
    ic = tmp_path / "ic.json"
    ic.write_text(json.dumps({"db": "concert"}))
    with pytest.raises(TaskError, match="expected a JSON list"):
        load_tasks(ic)


def test_malformed_spider_tables(tmp_path: Path) -> None:
    make_spider(tmp_path)
    data = json.loads((tmp_path / "tables.json").read_text())
    data[0]["column_names_original"].append([7, "ghost"])
    (tmp_path / "tables.json").write_text(json.dumps(data))
    with pytest.raises(TaskError) as err:
        load_tasks(tmp_path)
    assert err.value.field == "column_names_original" and "tables.json[0]" in err.value.source


# ---------------------------------------------------------------------- MySQL dumps
DUMP = r"""-- a dump in mysqldump's layout, two databases
CREATE USER 'admin'@'%' IDENTIFIED BY 'admin';
GRANT ALL PRIVILEGES ON *.* TO 'admin'@'%';
FLUSH PRIVILEGES;

CREATE DATABASE  IF NOT EXISTS `school` /*!40100 DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci */;
USE `school`;
/*!40101 SET @OLD_CHARACTER_SET_CLIENT=@@CHARACTER_SET_CLIENT */;
DROP TABLE IF EXISTS `Student`;
CREATE TABLE `Student` (
  `StuID` int NOT NULL AUTO_INCREMENT,
  `Name` text COLLATE utf8mb4_general_ci,
  `Born` date DEFAULT NULL,
  `Score` double DEFAULT NULL,
  `Code` varchar(4) COLLATE utf8mb4_general_ci NOT NULL,
  PRIMARY KEY (`StuID`),
  UNIQUE KEY `code_u` (`Code`),
  KEY `name_k` (`Name`(20))
) ENGINE=InnoDB AUTO_INCREMENT=4 DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;
LOCK TABLES `Student` WRITE;
INSERT INTO `Student` VALUES (1,'O\'Brien; \"Jr\"','2001-02-03',-1.5,'A1'),(2,'back\\slash\nnewline',NULL,3,'B2'),(3,NULL,NULL,NULL,'C;3');
UNLOCK TABLES;
CREATE TABLE `enrol` (
  `StuID` int NOT NULL,
  `Course` text COLLATE utf8mb4_general_ci NOT NULL,
  PRIMARY KEY (`StuID`,`Course`(255)),
  CONSTRAINT `enrol_fk` FOREIGN KEY (`StuID`) REFERENCES `Student` (`StuID`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;
INSERT INTO `enrol` VALUES (1,'math'),(1,'art'),(3,'math');

CREATE DATABASE IF NOT EXISTS `empty_one`;
USE `empty_one`;
CREATE TABLE `t` (`x` int DEFAULT NULL) ENGINE=InnoDB;
"""


def write_dump_tasks(tmp_path: Path, records: list[dict]) -> Path:
    (tmp_path / "dbs.sql").write_text(DUMP)
    path = tmp_path / "questions.json"
    path.write_text(json.dumps(records))
    return path


def test_a_mysql_dump_loads_on_sqlite_with_text_exact(tmp_path: Path) -> None:
    from agentenvs.envs.intercode_sql.mysql_dump import read_dump

    dump = read_dump(_dump_file(tmp_path))
    assert sorted(dump.databases) == ["empty_one", "school"]
    assert [s.split()[0] for s in dump.skipped] == ["CREATE", "GRANT", "FLUSH"]
    questions = write_dump_tasks(
        tmp_path,
        [
            {
                "db": "school",
                "query": "Names by id?",
                "gold": "SELECT Name FROM student ORDER BY StuID",
            },
            {"db": "school", "query": "Courses?", "gold": "SELECT count(*) FROM ENROL"},
            {"db": "empty_one", "query": "Rows?", "gold": "SELECT * FROM t"},
        ],
    )
    env = InterCodeSQLEnv(tasks_path=questions)
    env.reset(seed=0, options={"task_id": "school-001"})
    obs, *_ = env.step("SELECT Name, Born, Score, Code FROM Student ORDER BY StuID")
    assert "('O\\'Brien; \"Jr\"', '2001-02-03', -1.5, 'A1')" in obs, obs
    assert repr("back\\slash\nnewline") in obs and "(None, None, None, 'C;3')" in obs
    assert env.step("submit")[1] == 0.0  # four columns are not the gold's one
    for task_id in env.task_ids:
        env.reset(seed=0, options={"task_id": task_id})
        env.step(env.gold_query)
        assert env.step("submit")[1] == 1.0, task_id
    # keys survive the conversion: the primary key and the unique key refuse duplicates
    env.reset(seed=0, options={"task_id": "school-001"})
    assert "UNIQUE constraint failed" in env.step("INSERT INTO Student (Code) VALUES ('A1')")[0]
    assert "NOT NULL" in env.step("INSERT INTO Student (Name) VALUES ('x')")[0]
    assert "UNIQUE" in env.step("INSERT INTO enrol VALUES (1, 'math')")[0]
    env.close()


def _dump_file(tmp_path: Path) -> Path:
    path = tmp_path / "dbs.sql"
    path.write_text(DUMP)
    return path


def test_databases_path_names_the_dump(tmp_path: Path) -> None:
    dump = _dump_file(tmp_path)
    elsewhere = tmp_path / "q"
    elsewhere.mkdir()
    questions = elsewhere / "q.csv"
    questions.write_text('query,gold,db\n"How many, in all?",SELECT count(*) FROM Student,school\n')
    tasks = load_tasks(questions, databases_path=dump)
    (task,) = tasks.tasks.values()
    assert task.question == "How many, in all?" and task.db == "school"
    assert tasks.databases["school"].kind == "mysql_dump"
    with pytest.raises(TaskError, match="database 'school' not found"):
        load_tasks(questions)  # no dump beside it, none given


def test_malformed_dumps_and_csv_name_file_and_field(tmp_path: Path) -> None:
    from agentenvs.envs.intercode_sql.mysql_dump import read_dump

    bad = tmp_path / "bad.sql"
    bad.write_text("CREATE DATABASE a;\nUSE a;\nINSERT INTO `nope` VALUES (1);\n")
    with pytest.raises(TaskError, match=r"bad\.sql.*INSERT.*unknown table"):
        read_dump(bad)
    none = tmp_path / "none.sql"
    none.write_text("SELECT 1;\n")
    with pytest.raises(TaskError, match=r"none\.sql.*CREATE DATABASE"):
        read_dump(none)
    questions = tmp_path / "q.csv"
    questions.write_text("query,gold\nq,SELECT 1\n")
    with pytest.raises(TaskError, match=r"q\.csv.*db.*missing column"):
        load_tasks(questions)
    questions.write_text("query,gold,db\nq,SELECT 1,x\n")
    with pytest.raises(TaskError, match=r"databases_path.*not a MySQL dump"):
        load_tasks(questions, databases_path=questions)


@pytest.mark.mysql
def test_spider_layout_on_mysql_with_gold_in_another_case(tmp_path: Path, mysql_url: str) -> None:
    """Spider's own layout on the server: the .sqlite files become a template, and a gold
    query spelling the tables otherwise (``SINGER``) runs whatever the server's setting."""
    url = mysql_url
    make_spider(tmp_path)
    records = json.loads((tmp_path / "dev.json").read_text())
    records[0]["query"] = "SELECT count(*) FROM SINGER AS S WHERE s.singer_id > 0"
    (tmp_path / "dev.json").write_text(json.dumps(records))
    env = InterCodeSQLEnv(tasks_path=tmp_path, backend="mysql", mysql_url=url)
    try:
        for task_id in env.task_ids:
            env.reset(seed=0, options={"task_id": task_id})
            obs, *_ = env.step(f"```sql\n{env.gold_query}\n```")
            assert "Error" not in obs, obs
            assert env.step("submit")[1] == 1.0, task_id
    finally:
        env.close()


def test_a_mysql_flavoured_gold_runs_on_sqlite_through_sqlglot(tmp_path: Path) -> None:
    """InterCode's gold queries are MySQL's: one SQLite cannot run as written is read as
    MySQL and written as SQLite by sqlglot, and the agent's SQLite answer scores 1.0."""
    dump = _dump_file(tmp_path)
    questions = tmp_path / "q.csv"
    questions.write_text(
        "query,gold,db\n"
        "Codes with a mark?,\"SELECT CONCAT(Code, '!'), LOCATE('1', Code) FROM Student\",school\n"
    )
    env = InterCodeSQLEnv(tasks_path=questions, databases_path=dump)
    env.reset(seed=0)
    assert "||" in env.gold_query and "INSTR" in env.gold_query.upper()
    env.step("SELECT Code || '!', instr(Code, '1') FROM Student")
    assert env.step("submit")[1] == 1.0
