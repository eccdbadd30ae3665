"""log and conversations: the time-stamped responses and each conversation's clock."""
