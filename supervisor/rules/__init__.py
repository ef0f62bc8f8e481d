"""The supervisor's rules, one room each (docs/SUPERVISOR.md): every module declares its `Rule`s (the
states each owns, its deadline, its look-back and the history it reads) beside the function that decides,
and the states it is the first owner of (`State`). supervisor/decide.py orders them; a new rule is one
module here, its line in decide.py's RULES and its test.

    release   releasing, finished, job_ended        boot      failed_to_start, never_started
    budget    over_budget                           recovery  supervisor/recover.py's faults and plans
    pool      trial_ended (a pool's trials)         slurm     Slurm's own job states and its queue
    idle      idle                                  alerts    unverified, unreachable, blind
"""
