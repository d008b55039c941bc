"""What every room of kafkalite shares: error codes, configuration, record and partition types."""
