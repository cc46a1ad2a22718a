"""Local executor: a throwaway real Ceph cluster on this machine (like vstart.sh)."""
