"""Client quotas (KIP-13, KIP-55, KIP-124, KIP-219, KIP-546): entities, their configs, the
per-quota-type managers and how a throttled client is held back."""
