"""The XMemo race campaign: its model and its runs."""
