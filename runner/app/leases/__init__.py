"""Several replicas on Leases: leader election (one works) and sharding (all work, each on its
share of the CRs)."""
