"""The local cluster: NameServer and broker-stub processes on loopback that outlive the command."""
