"""Redis: one server, Sentinel or Cluster; keys, clock, replication waits, Lua files, a local
server."""
