"""The databases: one SQLite store under the find-db and the perf-db, their system dbs, export and import."""
