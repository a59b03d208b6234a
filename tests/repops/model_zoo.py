"""Models we did not write, as people build them: Hugging Face `transformers` families from
small configs (no download, dropout 0 through the config as a user sets it) and plain
torch.nn modules. name -> () -> (module, batch maker (seed) -> args, loss(module, *args))."""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def _ids(vocab, shape):
    return lambda seed: (torch.randint(0, vocab, shape, generator=torch.Generator().manual_seed(seed)),)


def _lm(model, *args):
    return model(input_ids=args[0], labels=args[0]).loss


def _classify(model, ids):
    return model(input_ids=ids, labels=(ids[:, 0] % 2)).loss


_SMALL = dict(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=64, attention_dropout=0.0)


def _hf(cls, cfg, loss=_lm, batch=None):
    def build():
        import transformers as T
        torch.manual_seed(0)
        config = getattr(T, cfg[0])(**cfg[1])
        return getattr(T, cls)(config).float(), batch or _ids(100, (2, 8)), loss
    return build


def _vit_loss(model, px):
    return model(pixel_values=px, labels=torch.tensor([0, 1])).loss


class CNN(nn.Module):
    """Conv1d/2d with stride, padding, dilation and groups; batch and group norm; max, average
    and adaptive pooling; F.pad."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=2)
        self.gn = nn.GroupNorm(2, 8)
        self.c3 = nn.Conv1d(8, 4, 3, dilation=2)
        self.fc = nn.Linear(4, 5)

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.bn(self.c1(x))), 2, ceil_mode=True)
        h = F.avg_pool2d(self.gn(self.c2(h)), 2, padding=1, count_include_pad=False).flatten(2)
        return self.fc(F.adaptive_avg_pool1d(self.c3(F.pad(h, (2, 2))), 1).flatten(1))


class Recurrent(nn.Module):
    """An embedding with a padding index, a 2-layer bidirectional LSTM with projections, a GRU
    and a ReLU RNN."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 8, padding_idx=0)
        self.lstm = nn.LSTM(8, 6, num_layers=2, batch_first=True, bidirectional=True, proj_size=4)
        self.gru = nn.GRU(8, 5)
        self.rnn = nn.RNN(5, 5, nonlinearity="relu")
        self.fc = nn.Linear(13, 20)

    def forward(self, ids):
        e = self.emb(ids)
        a, _ = self.lstm(e)
        b, h = self.gru(e.transpose(0, 1))
        b, _ = self.rnn(b, h)
        return self.fc(torch.cat([a, b.transpose(0, 1)], -1))


class Encoder(nn.Module):
    """nn.MultiheadAttention with a bool mask, a pre-norm nn.TransformerEncoder with a causal
    float mask, and F.scaled_dot_product_attention."""

    def __init__(self):
        super().__init__()
        self.mha = nn.MultiheadAttention(16, 4, batch_first=True)
        layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True, norm_first=True)
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.fc = nn.Linear(16, 3)

    def forward(self, x):
        T = x.shape[1]
        h, _ = self.mha(x, x, x, attn_mask=torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1))
        h = self.enc(h, mask=nn.Transformer.generate_square_subsequent_mask(T, device=x.device), is_causal=True)
        return self.fc(h + F.scaled_dot_product_attention(h, h, h, is_causal=True))


def _nn(cls, batch, loss):
    def build():
        torch.manual_seed(0)
        return cls(), batch, loss
    return build


def _images(seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(4, 3, 12, 12, generator=g), torch.randint(0, 5, (4,), generator=g)


def _tokens(seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 20, (3, 7), generator=g), torch.randint(0, 20, (3, 7), generator=g)


def _vectors(seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(2, 6, 16, generator=g), torch.randint(0, 3, (2, 6), generator=g)


MODELS = {
    "hf-llama-sdpa": _hf("LlamaForCausalLM", ("LlamaConfig", dict(_SMALL, attn_implementation="sdpa"))),
    "hf-llama-eager": _hf("LlamaForCausalLM", ("LlamaConfig", dict(_SMALL, attn_implementation="eager"))),
    "hf-mistral": _hf("MistralForCausalLM", ("MistralConfig", dict(_SMALL, attn_implementation="sdpa"))),
    "hf-qwen2": _hf("Qwen2ForCausalLM", ("Qwen2Config", dict(_SMALL, attn_implementation="eager"))),
    "hf-gpt2": _hf("GPT2LMHeadModel", ("GPT2Config", dict(vocab_size=100, n_embd=32, n_layer=2, n_head=4,
                                                           n_positions=64, resid_pdrop=0.0, embd_pdrop=0.0,
                                                           attn_pdrop=0.0, attn_implementation="sdpa"))),
    "hf-bert": _hf("BertForSequenceClassification", ("BertConfig", dict(
        vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        attn_implementation="eager")), loss=_classify),
    "hf-roberta": _hf("RobertaForSequenceClassification", ("RobertaConfig", dict(
        vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, pad_token_id=1,
        attn_implementation="eager")), loss=_classify),
    "hf-distilbert": _hf("DistilBertForSequenceClassification", ("DistilBertConfig", dict(
        vocab_size=100, dim=32, n_layers=2, n_heads=4, hidden_dim=64, max_position_embeddings=64, dropout=0.0,
        attention_dropout=0.0, seq_classif_dropout=0.0, attn_implementation="sdpa")), loss=_classify),
    "hf-t5": _hf("T5ForConditionalGeneration", ("T5Config", dict(
        vocab_size=100, dropout_rate=0.0, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
        decoder_start_token_id=0, pad_token_id=0))),
    "hf-vit": _hf("ViTForImageClassification", ("ViTConfig", dict(
        image_size=16, patch_size=4, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, num_labels=2, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        attn_implementation="eager")), loss=_vit_loss,
        batch=lambda seed: (torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(seed)),)),
    "nn-cnn": _nn(CNN, _images, lambda m, x, y: F.cross_entropy(m(x), y)),
    "nn-recurrent": _nn(Recurrent, _tokens, lambda m, ids, y: F.cross_entropy(m(ids).flatten(0, 1), y.flatten())),
    "nn-encoder": _nn(Encoder, _vectors, lambda m, x, y: F.cross_entropy(m(x).flatten(0, 1), y.flatten())),
}
