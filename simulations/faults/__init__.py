"""Fault campaigns: a seeded fault schedule (``schedule``, pure), the loopback proxy that loses
answers (``proxy``), and the nemesis that injects the faults and audits what survived them
(``nemesis``); ``report`` writes the timeline and the plots."""
