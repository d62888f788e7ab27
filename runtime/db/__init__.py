"""Redis: one server, Sentinel or Cluster; keys, clock, replication waits, a local server."""
