"""Runs for a lent accelerator machine (the workplace's ``device`` tool): the papers' ``paper`` training profiles
on CUDA. ``prepare`` packs what that bare machine lacks, ``run.sh`` trains there, ``summarise`` writes the report."""
