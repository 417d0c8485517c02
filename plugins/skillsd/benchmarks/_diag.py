import tempfile, torch
from stackrl.run import build_trainer
from stackrl.testing.heldout import recipe_config, right_and_wrong_rollout, WRITTEN_PROBLEMS
from stackrl.blocks.teacher import teacher_prompts
torch.set_num_threads(1)
with tempfile.TemporaryDirectory() as out:
    cfg = recipe_config("configs/recipes/skillsd-cpu.yaml", plugins=True, seed=0, steps=1, output_dir=out)
    tr = build_trainer(cfg)
    tok = tr.processing_class
    ro = right_and_wrong_rollout(tok)
    pol = tr._shared_policy
    ro.columns["skill"] = [ro.columns["solution"][i] for i in range(4)]
    tctx = teacher_prompts(ro.prompts, ro.columns, "{skill}\n\n{prompt}")
    s = pol.score(ro.prompt_ids, ro.completion_ids)
    t = pol.score(tctx, ro.completion_ids)
    for i in range(4):
        n = int(s.mask[i].sum())
        print(repr(ro.completions[i][:30]), "gap s-q:", [round(x,2) for x in (s.logprobs[i,:n]-t.logprobs[i,:n]).tolist()])
