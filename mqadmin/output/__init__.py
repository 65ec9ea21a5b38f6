"""What mqadmin prints: the console and JSON, tables that fit the terminal, and the marks plots share."""
