"""InterCode-SQL: answer a question by querying a database, then ``submit`` the last result."""
