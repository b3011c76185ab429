"""Database backends for InterCode-SQL: embedded SQLite and a MySQL/MariaDB server."""
