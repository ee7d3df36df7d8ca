"""Option scoring equals the plain causal-LM log-likelihood of each option after the context."""
import torch

from model.config import LanguageHeadConfig
from model.language_head import LanguageHead, build_gpt2


def _option_step_logits(head, context, ids):
    """The plain LM on [context | option ids]: the logits that predict each option token."""
    seq = torch.cat([context, head.embed(ids)]).unsqueeze(0)
    n = len(context)
    return head.lm(inputs_embeds=seq).logits[0, n - 1:n - 1 + len(ids)]


def test_cached_option_scores_match_full_sequence_loglik():
    torch.manual_seed(0)
    cfg = LanguageHeadConfig(vocab_size=50, layers=2, heads=2, max_positions=64)
    head = LanguageHead(build_gpt2(cfg, width=16, dropout=0.0), cfg).eval()
    prefix = torch.randn(2, 3, 16)
    prompt_ids = torch.randint(1, 50, (2, 6))
    prompt_mask = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])
    option_ids = torch.randint(1, 50, (2, 3, 4))
    option_mask = torch.tensor([[[1, 0, 0, 0], [1, 1, 1, 0], [1, 1, 0, 0]],
                                [[1, 1, 1, 1], [1, 0, 0, 0], [0, 0, 0, 0]]], dtype=torch.bool)
    option_valid = option_mask.any(-1)
    with torch.no_grad():
        out = head(prefix, prompt_ids, prompt_mask, option_ids, option_mask, option_valid)
        for i in range(2):
            prompt = prompt_ids[i, prompt_mask[i]]
            context = torch.cat([head.embed(prompt), prefix[i]])  # prompt, then prefix
            for o in range(3):
                ids = option_ids[i, o, option_mask[i, o]]
                if len(ids) == 0:
                    assert out["option_logits"][i, o] <= -1e3
                    continue
                logp = _option_step_logits(head, context, ids).log_softmax(-1)
                expected = logp.gather(1, ids[:, None]).mean()
                torch.testing.assert_close(out["option_logits"][i, o], expected, atol=1e-5, rtol=0)


def test_option_softmax_is_the_lm_renormalised_over_the_samples_option_tokens():
    """lm.softmax=options: each token's log-prob is the full LM's, renormalised over the distinct
    tokens of that sample's options; it does not depend on the other samples of the batch."""
    torch.manual_seed(0)
    cfg = LanguageHeadConfig(vocab_size=50, layers=2, heads=2, max_positions=64, softmax="options")
    head = LanguageHead(build_gpt2(cfg, width=16, dropout=0.0), cfg).eval()
    prefix = torch.randn(2, 3, 16)
    prompt_ids = torch.randint(1, 50, (2, 6))
    prompt_mask = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])
    option_ids = torch.tensor([[[7, 0, 0, 0], [7, 9, 7, 0], [3, 9, 0, 0]],
                               [[5, 6, 8, 5], [8, 0, 0, 0], [0, 0, 0, 0]]])
    option_mask = torch.tensor([[[1, 0, 0, 0], [1, 1, 1, 0], [1, 1, 0, 0]],
                                [[1, 1, 1, 1], [1, 0, 0, 0], [0, 0, 0, 0]]], dtype=torch.bool)
    option_valid = option_mask.any(-1)
    with torch.no_grad():
        out = head(prefix, prompt_ids, prompt_mask, option_ids, option_mask, option_valid)
        assert torch.isfinite(out["option_token_logprobs"]).all()
        for i in range(2):
            candidates = option_ids[i][option_mask[i]].unique()
            context = torch.cat([head.embed(prompt_ids[i, prompt_mask[i]]), prefix[i]])
            for o in range(3):
                ids = option_ids[i, o, option_mask[i, o]]
                if len(ids) == 0:
                    assert out["option_logits"][i, o] <= -1e3
                    continue
                steps = _option_step_logits(head, context, ids)
                logp = steps.gather(1, ids[:, None])[:, 0] - steps[:, candidates].logsumexp(-1)
                torch.testing.assert_close(out["option_token_logprobs"][i, o, :len(ids)], logp, atol=1e-5, rtol=0)
                torch.testing.assert_close(out["option_logits"][i, o], logp.mean(), atol=1e-5, rtol=0)
        # The same sample alone in its batch scores the same.
        alone = head(prefix[:1], prompt_ids[:1], prompt_mask[:1], option_ids[:1], option_mask[:1], option_valid[:1])
        torch.testing.assert_close(alone["option_logits"], out["option_logits"][:1], atol=1e-5, rtol=0)


def test_option_softmax_with_single_token_options():
    """Every option one token long (counts, mark labels): no later positions to score."""
    torch.manual_seed(0)
    cfg = LanguageHeadConfig(vocab_size=50, layers=1, heads=2, max_positions=64, softmax="options")
    head = LanguageHead(build_gpt2(cfg, width=16, dropout=0.0), cfg).eval()
    option_ids = torch.tensor([[[3], [4], [5], [6]], [[7], [8], [7], [0]]])
    option_mask = torch.tensor([[[1], [1], [1], [1]], [[1], [1], [1], [0]]], dtype=torch.bool)
    with torch.no_grad():
        out = head(torch.randn(2, 3, 16), torch.randint(1, 50, (2, 5)), torch.ones(2, 5, dtype=torch.bool),
                   option_ids, option_mask, option_mask.any(-1))
    probs = out["option_logits"][0].exp()
    torch.testing.assert_close(probs.sum(), torch.tensor(1.0))  # a softmax over the four options
    assert out["option_logits"][1, 0] == out["option_logits"][1, 2]  # the same token, the same score
    assert out["option_logits"][1, 3] <= -1e3
