"""faithgrpo's symbolic rewards for RL frameworks other than TRL (no framework is a dependency).

==============  ==================================================  ==========================
framework       entry point                                         module
==============  ==================================================  ==========================
verl            ``compute_score(data_source, solution_str,          ``integrations/verl.py``
                ground_truth, extra_info)``
OpenRLHF        ``reward_func(queries, prompts, labels)``           ``integrations/openrlhf.py``
==============  ==================================================  ==========================

Both score one completion with the same reward functions TRL runs (`faithgrpo.rewards`: outcome,
format, trace_format, CALVER; CRoS needs a reference model and stays with the TRL trainers) and
combine them as TRL does, ``Σ weight · reward`` over the rewards that apply
(`faithgrpo.integrations.scoring`). The row (the causal ``problem`` JSON or the reasoning-gym
``entry``, and the listed ``answer``) travels in the fields each framework passes.
"""
