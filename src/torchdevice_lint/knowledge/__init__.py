"""What torch code means, one home per fact: the backend table, availability guards, user flags."""
