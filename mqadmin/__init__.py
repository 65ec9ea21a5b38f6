"""Admin tools: a client library over the remoting protocol and the mqadmin CLI."""
