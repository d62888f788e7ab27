"""The promise checked like a database: generated histories against a reference model."""
