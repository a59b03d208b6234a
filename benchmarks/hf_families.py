"""Hugging Face families beyond the test zoo (tests/repops/model_zoo.py), one training step each
from a tiny config (no download), as a user would run them under RepOps: decoders and encoders of text,
and (each with its kind of batch: INPUTS) vision, audio, encoder-decoder and two-tower families:

  python benchmarks/hf_families.py [--only gemma3 mamba [--update]] [--no-emu] [--no-export]

Per family: status (ok; refused: a RepOps or Verde error naming what to change; crash: any
other error, a bug), the loss and gradients against native torch (RepOps rounds each op once in its
own fixed order: close, not equal; the largest gradient difference relative to that gradient's
own scale, gradients that are zero in exact arithmetic, ~1e-13 of rounding noise in both, left
out), the CPU backend against the emulated CUDA kernels bit for bit, and the family exported as a
job's program (program.export: torch.export and folding) stepping with the module's bits
(program_same_bits; --no-export skips it). The zoo's families go
through every protocol check in CI; these through this one step (tests/repops/test_hf_families.py).
Writes benchmarks/results/hf_families.json.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
OUT = ROOT / "benchmarks" / "results" / "hf_families.json"

_S = dict(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
          num_key_value_heads=2, max_position_embeddings=64)
_ENC = dict(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)
# family -> (model class, config class, config): decoders train as causal LMs, encoders classify
FAMILIES = {
    "gemma": ("GemmaForCausalLM", "GemmaConfig", dict(_S, head_dim=8)),
    "gemma2": ("Gemma2ForCausalLM", "Gemma2Config", dict(_S, head_dim=8, attn_implementation="eager")),
    "gemma3": ("Gemma3ForCausalLM", "Gemma3TextConfig", dict(_S, head_dim=8, attn_implementation="eager")),
    "phi": ("PhiForCausalLM", "PhiConfig", dict(_S)),
    "phi3": ("Phi3ForCausalLM", "Phi3Config", dict(_S, pad_token_id=0)),
    "qwen3": ("Qwen3ForCausalLM", "Qwen3Config", dict(_S, head_dim=8)),
    "olmo": ("OlmoForCausalLM", "OlmoConfig", dict(_S, pad_token_id=0)),
    "stablelm": ("StableLmForCausalLM", "StableLmConfig", dict(_S)),
    "starcoder2": ("Starcoder2ForCausalLM", "Starcoder2Config", dict(_S)),
    "cohere": ("CohereForCausalLM", "CohereConfig", dict(_S, pad_token_id=0)),
    "granite": ("GraniteForCausalLM", "GraniteConfig", dict(_S)),
    "gpt-neox": ("GPTNeoXForCausalLM", "GPTNeoXConfig", dict(_ENC, max_position_embeddings=64)),
    "falcon": ("FalconForCausalLM", "FalconConfig", dict(vocab_size=100, hidden_size=32, num_hidden_layers=2,
                                                         num_attention_heads=4)),
    "bloom": ("BloomForCausalLM", "BloomConfig", dict(vocab_size=100, hidden_size=32, n_layer=2, n_head=4)),
    "gpt-j": ("GPTJForCausalLM", "GPTJConfig", dict(vocab_size=100, n_embd=32, n_layer=2, n_head=4, n_positions=64,
                                                    rotary_dim=4)),
    "gpt-bigcode": ("GPTBigCodeForCausalLM", "GPTBigCodeConfig", dict(vocab_size=100, n_embd=32, n_layer=2, n_head=4,
                                                                      n_positions=64)),
    "mpt": ("MptForCausalLM", "MptConfig", dict(vocab_size=100, d_model=32, n_layers=2, n_heads=4, max_seq_len=64)),
    "mamba": ("MambaForCausalLM", "MambaConfig", dict(vocab_size=100, hidden_size=32, num_hidden_layers=2,
                                                      state_size=4)),
    "electra": ("ElectraForSequenceClassification", "ElectraConfig", dict(_ENC, embedding_size=16)),
    "albert": ("AlbertForSequenceClassification", "AlbertConfig", dict(_ENC, embedding_size=16)),
    # (problem_type set: its default head keeps the labels >= 0 by nonzero, a shape that depends on the batch,
    # which one committed graph cannot have; single-label classification is its plain cross-entropy)
    "deberta-v2": ("DebertaV2ForSequenceClassification", "DebertaV2Config",
                   dict(_ENC, problem_type="single_label_classification")),
    "mobilebert": ("MobileBertForSequenceClassification", "MobileBertConfig",
                   dict(_ENC, embedding_size=16, intra_bottleneck_size=16)),
}
_V = dict(image_size=32, num_channels=3, num_labels=2)  # 32x32 images, two classes
_VIT = dict(_V, patch_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)
_CNN = dict(_V, hidden_sizes=[16, 32], depths=[1, 1])
_AUDIO = dict(_ENC, conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16,
              num_conv_pos_embedding_groups=4, mask_time_prob=0.0, num_labels=2)  # SpecAugment off: numpy's draws
_SEQ2SEQ = dict(vocab_size=100, d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4,
                decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64,
                pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=2)
# families beyond text, each with its kind of batch (INPUTS: the tensors and the loss they give); the
# families above are "lm" (a causal LM on ids, its labels the ids) or "cls" (a sequence classifier)
FAMILIES.update({
    "resnet": ("ResNetForImageClassification", "ResNetConfig", dict(_CNN, embedding_size=16, layer_type="basic"),
               "image"),
    "convnext": ("ConvNextForImageClassification", "ConvNextConfig", dict(_CNN, patch_size=4, num_stages=2), "image"),
    "convnextv2": ("ConvNextV2ForImageClassification", "ConvNextV2Config", dict(_CNN, patch_size=4, num_stages=2),
                   "image"),
    "regnet": ("RegNetForImageClassification", "RegNetConfig", dict(_CNN, embedding_size=16, groups_width=8),
               "image"),
    "efficientnet": ("EfficientNetForImageClassification", "EfficientNetConfig",
                     dict(_V, width_coefficient=0.25, hidden_dim=320, in_channels=[32, 16], out_channels=[16, 24],
                          kernel_sizes=[3, 5], strides=[1, 2], num_block_repeats=[1, 1], expand_ratios=[1, 6]),
                     "image"),  # (two of the seven blocks: the seven take minutes on the CPU backend)
    "mobilevit": ("MobileViTForImageClassification", "MobileViTConfig",
                  dict(_V, patch_size=2, hidden_sizes=[16, 24, 32], neck_hidden_sizes=[8, 8, 16, 16, 24, 32, 64],
                       num_attention_heads=2), "image"),
    "swin": ("SwinForImageClassification", "SwinConfig",
             dict(_V, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=4), "image"),
    "deit": ("DeiTForImageClassification", "DeiTConfig", dict(_VIT), "image"),
    "beit": ("BeitForImageClassification", "BeitConfig", dict(_VIT, use_relative_position_bias=True), "image"),
    "dinov2": ("Dinov2ForImageClassification", "Dinov2Config", dict(_VIT), "image"),
    "segformer": ("SegformerForSemanticSegmentation", "SegformerConfig",
                  dict(_V, num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32],
                       patch_sizes=[7, 3], strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[2, 2],
                       decoder_hidden_size=32, num_labels=3), "segment"),
    "wav2vec2": ("Wav2Vec2ForCTC", "Wav2Vec2Config", dict(_AUDIO, vocab_size=16, pad_token_id=0), "ctc"),
    "hubert": ("HubertForSequenceClassification", "HubertConfig", dict(_AUDIO), "audio"),
    "wavlm": ("WavLMForSequenceClassification", "WavLMConfig", dict(_AUDIO, num_buckets=16, max_bucket_distance=32),
              "audio"),
    "data2vec-audio": ("Data2VecAudioForSequenceClassification", "Data2VecAudioConfig",
                       dict(_AUDIO, num_conv_pos_embeddings=2), "audio"),  # (here a count of conv layers)
    "unispeech-sat": ("UniSpeechSatForSequenceClassification", "UniSpeechSatConfig", dict(_AUDIO), "audio"),
    "sew": ("SEWForSequenceClassification", "SEWConfig", dict(_AUDIO, squeeze_factor=2), "audio"),
    "wav2vec2-conformer": ("Wav2Vec2ConformerForSequenceClassification", "Wav2Vec2ConformerConfig",
                           dict(_AUDIO, conv_depthwise_kernel_size=3, position_embeddings_type="relative"), "audio"),
    "whisper": ("WhisperForConditionalGeneration", "WhisperConfig",
                dict(_SEQ2SEQ, num_mel_bins=8, max_source_positions=8, max_target_positions=16), "speech"),
    "bart": ("BartForConditionalGeneration", "BartConfig", dict(_SEQ2SEQ), "lm"),
    "mbart": ("MBartForConditionalGeneration", "MBartConfig", dict(_SEQ2SEQ), "lm"),
    "pegasus": ("PegasusForConditionalGeneration", "PegasusConfig", dict(_SEQ2SEQ), "lm"),
    "marian": ("MarianMTModel", "MarianConfig", dict(_SEQ2SEQ), "lm"),
    "mt5": ("MT5ForConditionalGeneration", "MT5Config",
            dict(vocab_size=100, d_model=32, d_kv=8, d_ff=64, num_layers=1, num_decoder_layers=1, num_heads=4,
                 relative_attention_num_buckets=8, decoder_start_token_id=0), "lm"),
    "clip": ("CLIPModel", "CLIPConfig", dict(text_config=dict(_ENC, max_position_embeddings=16),
                                             vision_config=dict(_VIT), projection_dim=16), "pair"),
    "siglip": ("SiglipModel", "SiglipConfig", dict(text_config=dict(_ENC, max_position_embeddings=16),
                                                   vision_config=dict(_VIT)), "pair"),
    "opt": ("OPTForCausalLM", "OPTConfig", dict(_ENC, ffn_dim=64, word_embed_proj_dim=32,
                                                max_position_embeddings=64), "lm"),
    "xlm-roberta": ("XLMRobertaForSequenceClassification", "XLMRobertaConfig", dict(_ENC), "cls"),
    "funnel": ("FunnelForSequenceClassification", "FunnelConfig",
               dict(vocab_size=100, block_sizes=[1, 1], num_decoder_layers=1, d_model=32, n_head=4, d_head=8,
                    d_inner=64), "cls"),
    "longformer": ("LongformerForSequenceClassification", "LongformerConfig", dict(_ENC, attention_window=4), "cls"),
    "big-bird": ("BigBirdForSequenceClassification", "BigBirdConfig", dict(_ENC), "cls"),
    "nystromformer": ("NystromformerForSequenceClassification", "NystromformerConfig",
                      dict(_ENC, num_landmarks=4, segment_means_seq_len=8), "cls"),
    "canine": ("CanineForSequenceClassification", "CanineConfig",
               dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                    num_hash_buckets=64, local_transformer_stride=4, downsampling_rate=4), "cls"),
    "rwkv": ("RwkvForCausalLM", "RwkvConfig", dict(vocab_size=100, hidden_size=32, num_hidden_layers=2,
                                                   attention_hidden_size=32, intermediate_size=64,
                                                   context_length=16), "lm"),
    "reformer": ("ReformerModelWithLMHead", "ReformerConfig",
                 dict(vocab_size=100, hidden_size=32, num_attention_heads=2, attention_head_size=16,
                      attn_layers=["local", "lsh"], feed_forward_size=64, axial_pos_shape=[2, 4],
                      axial_pos_embds_dim=[16, 16], max_position_embeddings=8, local_attn_chunk_length=4,
                      lsh_attn_chunk_length=4, num_buckets=2, is_decoder=True, hash_seed=0), "lm"),
})
# families models in the wild bring (probed 2026-11-28: text encoders and decoders, MoE and state-space
# decoders, CNN and hierarchical vision, masked-image pre-training, speech-to-text, captioning, time series),
# each with its kind of batch (WILD: the CI test leaves them to this benchmark, but for the refused)
_WILD = {
    "gpt-neo": ("GPTNeoForCausalLM", "GPTNeoConfig",
                dict(vocab_size=100, hidden_size=32, num_layers=2, num_heads=4, window_size=4,
                     attention_types=[[["global", "local"], 1]], max_position_embeddings=64, intermediate_size=64)),
    "codegen": ("CodeGenForCausalLM", "CodeGenConfig", dict(vocab_size=100, n_embd=32, n_layer=2, n_head=4,
                                                            n_positions=64, rotary_dim=4)),
    "biogpt": ("BioGptForCausalLM", "BioGptConfig", dict(_ENC, max_position_embeddings=64)),
    "xglm": ("XGLMForCausalLM", "XGLMConfig", dict(vocab_size=100, d_model=32, num_layers=2, attention_heads=4,
                                                   ffn_dim=64, max_position_embeddings=64)),
    "olmo2": ("Olmo2ForCausalLM", "Olmo2Config", dict(_S, pad_token_id=0)),
    "qwen3-moe": ("Qwen3MoeForCausalLM", "Qwen3MoeConfig", dict(_S, head_dim=8, num_experts=4, num_experts_per_tok=2,
                                                                moe_intermediate_size=16)),
    "deepseek-v3": ("DeepseekV3ForCausalLM", "DeepseekV3Config",
                    dict(_S, num_key_value_heads=4, n_routed_experts=4, num_experts_per_tok=2, n_group=1, topk_group=1,
                         moe_intermediate_size=16, first_k_dense_replace=1, q_lora_rank=16, kv_lora_rank=16,
                         qk_rope_head_dim=4, qk_nope_head_dim=4, v_head_dim=8)),
    "jamba": ("JambaForCausalLM", "JambaConfig",
              dict(_S, num_experts=2, num_experts_per_tok=1, expert_layer_period=2, expert_layer_offset=1,
                   attn_layer_period=2, attn_layer_offset=1, mamba_d_state=4, mamba_d_conv=4, mamba_expand=2,
                   use_mamba_kernels=False)),
    "olmoe": ("OlmoeForCausalLM", "OlmoeConfig", dict(_S, num_experts=4, num_experts_per_tok=2)),
    "granitemoe": ("GraniteMoeForCausalLM", "GraniteMoeConfig", dict(_S, num_local_experts=4, num_experts_per_tok=2)),
    "mamba2": ("Mamba2ForCausalLM", "Mamba2Config", dict(vocab_size=100, hidden_size=32, num_hidden_layers=2,
                                                         state_size=8, num_heads=4, head_dim=16, n_groups=1, expand=2,
                                                         chunk_size=4)),
    "convbert": ("ConvBertForSequenceClassification", "ConvBertConfig", dict(_ENC, embedding_size=32,
                                                                             conv_kernel_size=3)),
    "roformer": ("RoFormerForSequenceClassification", "RoFormerConfig", dict(_ENC, embedding_size=32,
                                                                             max_position_embeddings=64)),
    "xlnet": ("XLNetForSequenceClassification", "XLNetConfig", dict(vocab_size=100, d_model=32, n_layer=2, n_head=4,
                                                                    d_inner=64)),
    "mpnet": ("MPNetForSequenceClassification", "MPNetConfig", dict(_ENC, max_position_embeddings=64)),
    "squeezebert": ("SqueezeBertForSequenceClassification", "SqueezeBertConfig",
                    dict(_ENC, embedding_size=32, q_groups=2, k_groups=2, v_groups=2, post_attention_groups=2,
                         intermediate_groups=2, output_groups=2)),
    "layoutlm": ("LayoutLMForSequenceClassification", "LayoutLMConfig", dict(_ENC, max_2d_position_embeddings=64)),
    "esm": ("EsmForSequenceClassification", "EsmConfig", dict(_ENC, pad_token_id=1, mask_token_id=2,
                                                              position_embedding_type="rotary",
                                                              max_position_embeddings=64)),
    "ibert": ("IBertForSequenceClassification", "IBertConfig", dict(_ENC, max_position_embeddings=64)),
    "deberta": ("DebertaForSequenceClassification", "DebertaConfig",
                dict(_ENC, problem_type="single_label_classification")),  # (as DeBERTa-v2: see above)
    "modernbert": ("ModernBertForSequenceClassification", "ModernBertConfig",
                   dict(_ENC, max_position_embeddings=64, global_attn_every_n_layers=2, local_attention=4,
                        pad_token_id=0)),
    "fnet": ("FNetForSequenceClassification", "FNetConfig", dict(vocab_size=100, hidden_size=32, num_hidden_layers=2,
                                                                 intermediate_size=64, max_position_embeddings=64)),
    "perceiver": ("PerceiverForSequenceClassification", "PerceiverConfig",
                  dict(vocab_size=100, d_model=32, d_latents=32, num_latents=8, num_blocks=1,
                       num_self_attends_per_block=1, num_self_attention_heads=4, num_cross_attention_heads=4,
                       max_position_embeddings=64), "inputs-cls"),
    "splinter": ("SplinterForQuestionAnswering", "SplinterConfig", dict(_ENC, max_position_embeddings=64), "qa"),
    # (hidden 64: its box embedding is hidden/4 wide, split over 8 box coordinates, each a sin and a cos)
    "bros": ("BrosForTokenClassification", "BrosConfig", dict(_ENC, hidden_size=64, intermediate_size=128,
                                                              max_position_embeddings=64), "bbox-token"),
    "levit": ("LevitForImageClassification", "LevitConfig",
              dict(_V, patch_size=16, hidden_sizes=[16, 32, 48], num_attention_heads=[1, 2, 3], depths=[1, 1, 1],
                   key_dim=[8, 8, 8]), "image"),
    "poolformer": ("PoolFormerForImageClassification", "PoolFormerConfig",
                   dict(_V, hidden_sizes=[16, 32], depths=[1, 1], num_encoder_blocks=2, patch_sizes=[7, 3],
                        strides=[4, 2], padding=[2, 1]), "image"),
    "mobilenet-v1": ("MobileNetV1ForImageClassification", "MobileNetV1Config", dict(_V, depth_multiplier=0.25),
                     "image"),
    "mobilenet-v2": ("MobileNetV2ForImageClassification", "MobileNetV2Config", dict(_V, depth_multiplier=0.25),
                     "image"),
    "bit": ("BitForImageClassification", "BitConfig", dict(_V, embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1],
                                                           layer_type="bottleneck", num_groups=8), "image"),
    "swinv2": ("Swinv2ForImageClassification", "Swinv2Config",
               dict(_V, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=4), "image"),
    "focalnet": ("FocalNetForImageClassification", "FocalNetConfig",
                 dict(_V, patch_size=4, embed_dim=16, depths=[1, 1], focal_levels=[2, 2], focal_windows=[3, 3]),
                 "image"),
    # (depth [1, 2]: transformers indexes stage i's drop-path rates by i, so stage i needs i + 1 layers)
    "cvt": ("CvtForImageClassification", "CvtConfig",
            dict(_V, embed_dim=[16, 32], num_heads=[1, 2], depth=[1, 2], patch_sizes=[7, 3], patch_stride=[4, 2],
                 patch_padding=[2, 1], mlp_ratio=[2.0, 2.0], attention_drop_rate=[0.0, 0.0], drop_rate=[0.0, 0.0],
                 drop_path_rate=[0.0, 0.0], qkv_bias=[True, True], cls_token=[False, True],
                 qkv_projection_method=["dw_bn", "dw_bn"], kernel_qkv=[3, 3], padding_kv=[1, 1], stride_kv=[2, 2],
                 padding_q=[1, 1], stride_q=[1, 1]), "image"),
    "pvt": ("PvtForImageClassification", "PvtConfig",
            dict(_V, num_encoder_blocks=2, depths=[1, 1], sequence_reduction_ratios=[2, 1], hidden_sizes=[16, 32],
                 patch_sizes=[4, 2], strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[2, 2]), "image"),
    "hiera": ("HieraForImageClassification", "HieraConfig",
              dict(_V, embed_dim=16, image_size=[32, 32], patch_size=[3, 3], patch_stride=[2, 2], patch_padding=[1, 1],
                   depths=[1, 1], num_heads=[1, 2], query_stride=[2, 2], masked_unit_size=[4, 4],
                   mask_unit_attn=[True, False], num_query_pool=1), "image"),
    "data2vec-vision": ("Data2VecVisionForImageClassification", "Data2VecVisionConfig",
                        dict(_VIT, use_relative_position_bias=True), "image"),
    # detection: the backbones and heads; their own losses match queries to targets with scipy's Hungarian
    # matcher (not installed here), so the "detect" batch scores every query against "no object" and a fixed box
    "yolos": ("YolosForObjectDetection", "YolosConfig", dict(_VIT, image_size=[32, 32], num_detection_tokens=4),
              "detect"),
    "detr": ("DetrForObjectDetection", "DetrConfig",
             dict(use_timm_backbone=False, use_pretrained_backbone=False, backbone=None, num_queries=4, num_labels=3,
                  backbone_config=dict(model_type="resnet", embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1],
                                       layer_type="basic", out_features=["stage2"]),
                  d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4, decoder_attention_heads=4,
                  encoder_ffn_dim=64, decoder_ffn_dim=64), "detect"),
    "vit-mae": ("ViTMAEForPreTraining", "ViTMAEConfig",
                dict(_VIT, decoder_hidden_size=16, decoder_num_hidden_layers=1, decoder_num_attention_heads=2,
                     decoder_intermediate_size=32, mask_ratio=0.5), "mae"),
    "speech-to-text": ("Speech2TextForConditionalGeneration", "Speech2TextConfig",
                       dict(_SEQ2SEQ, input_feat_per_channel=8, input_channels=1, num_conv_layers=2, conv_channels=16,
                            conv_kernel_sizes=[5, 5], max_source_positions=64, max_target_positions=64), "s2t"),
    "m2m100": ("M2M100ForConditionalGeneration", "M2M100Config", dict(_SEQ2SEQ)),
    "blenderbot": ("BlenderbotForConditionalGeneration", "BlenderbotConfig", dict(_SEQ2SEQ)),
    "led": ("LEDForConditionalGeneration", "LEDConfig",
            dict(_SEQ2SEQ, attention_window=4, max_encoder_position_embeddings=64, max_decoder_position_embeddings=64)),
    "umt5": ("UMT5ForConditionalGeneration", "UMT5Config",
             dict(vocab_size=100, d_model=32, d_kv=8, d_ff=64, num_layers=1, num_decoder_layers=1, num_heads=4,
                  relative_attention_num_buckets=8, decoder_start_token_id=0)),
    # (router_jitter_noise 0: a draw, like dropout, from RepOps' generator under RepOps and torch's natively)
    "switch-transformers": ("SwitchTransformersForConditionalGeneration", "SwitchTransformersConfig",
                            dict(vocab_size=100, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2,
                                 num_heads=4, num_experts=4, expert_capacity=8, encoder_sparse_step=1,
                                 decoder_sparse_step=1, relative_attention_num_buckets=8, decoder_start_token_id=0,
                                 router_jitter_noise=0.0)),
    "longt5": ("LongT5ForConditionalGeneration", "LongT5Config",
               dict(vocab_size=100, d_model=32, d_kv=8, d_ff=64, num_layers=1, num_decoder_layers=1, num_heads=4,
                    relative_attention_num_buckets=8, decoder_start_token_id=0, local_radius=2, global_block_size=2,
                    encoder_attention_type="transient-global")),
    # time series: PatchTST's forecast (MSE), the Time Series Transformer's StudentT likelihood
    "patchtst": ("PatchTSTForPrediction", "PatchTSTConfig",
                 dict(num_input_channels=2, context_length=16, patch_length=4, patch_stride=4, prediction_length=4,
                      d_model=16, num_attention_heads=2, num_hidden_layers=1, ffn_dim=32), "forecast"),
    "time-series-transformer": ("TimeSeriesTransformerForPrediction", "TimeSeriesTransformerConfig",
                                dict(prediction_length=4, context_length=8, lags_sequence=[1, 2], d_model=16,
                                     encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                                     decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32,
                                     num_time_features=1), "likelihood"),
    "blip": ("BlipForConditionalGeneration", "BlipConfig",
             dict(text_config=dict(_ENC, max_position_embeddings=16, encoder_hidden_size=32), vision_config=dict(_VIT),
                  projection_dim=16), "caption"),
    "git": ("GitForCausalLM", "GitConfig", dict(_ENC, max_position_embeddings=64, vision_config=dict(_VIT)), "caption"),
    "owlvit": ("OwlViTModel", "OwlViTConfig", dict(text_config=dict(_ENC, max_position_embeddings=16),
                                                   vision_config=dict(_VIT), projection_dim=16), "pair"),
}
FAMILIES.update(_WILD)
WILD = set(_WILD)
# refused under RepOps, each naming the op it lacks (tests/repops/test_hf_families.py holds the message)
REFUSED: dict = {"fnet": "RepOps has no FFT"}  # (its token mixing: torch.fft.fftn(x).real)
# its global pool, nn.AvgPool2d(320, ceil_mode=True) on an 8x8 map: a 320x320 window an output, minutes on the CPU
# backend (run it with --only efficientnet); Hiera: minutes on the CPU backend too. (MobileNet 1-2, CvT and LeViT
# were here at 1-5 minutes each on the emulated CUDA kernels: 1-9 s since the emulator's threads are fibers.)
SLOW = {"efficientnet", "hiera"}


def _not_run() -> dict:
    """The results file's note on each family the default run leaves out."""
    return {f: "slow on the CPU backend: --only " + f for f in sorted(SLOW)}


ZERO_BELOW = 1e-10  # a gradient this small everywhere is zero in exact arithmetic (a key bias under softmax)


def _g(seed: int):
    import torch
    return torch.Generator().manual_seed(seed)


def _ids(cfg, n=8):
    import torch
    return torch.randint(0, 100, (2, n), generator=_g(1))


def _pixels(cfg):
    import torch
    return torch.randn(2, 3, 32, 32, generator=_g(2))


def _series(channel, steps, features):
    """[2, steps, features] values of a time series (a slice of the image batch's channel)."""
    return _pixels(None)[:, channel, :steps, :features].contiguous()


def _detect_loss(out):
    """A detector's loss without matching: every query's class scores against the last class ("no object"
    in DETR and YOLOS) and its box against the image's centre box."""
    import torch
    logits = out.logits.flatten(0, 1)
    none = torch.full(logits.shape[:1], logits.shape[1] - 1, dtype=torch.long)
    return torch.nn.functional.cross_entropy(logits, none) + (out.pred_boxes - 0.5).abs().mean()


def _audio(cfg):
    import torch
    return torch.randn(2, 400, generator=_g(3))


def _randint(n, seed):
    import torch
    return torch.randint(0, n, (2,), generator=_g(seed))


def _boxes():
    """Boxes (x0, y0, x1, y1) in [0, 1], x0 <= x1 and y0 <= y1: two rows of eight tokens."""
    import torch
    return torch.rand(2, 8, 2, 2, generator=_g(6)).sort(dim=2).values.reshape(2, 8, 4)  # ((x0, y0), (x1, y1))


def _classes(n):
    import torch
    return lambda cfg: torch.randint(0, n, (2,), generator=_g(4))


# kind -> (the batch's tensors from the config, loss(model, *batch)): the batch is what a job's data gives
INPUTS = {
    "lm": ((_ids,), lambda m, ids: m(input_ids=ids, labels=ids).loss),
    "cls": ((_ids,), lambda m, ids: m(input_ids=ids, labels=ids[:, 0] % 2).loss),
    "image": ((_pixels, _classes(2)), lambda m, px, y: m(pixel_values=px, labels=y).loss),
    "segment": ((_pixels, lambda cfg: _ids(cfg, 32 * 32).view(2, 32, 32) % 3),
                lambda m, px, y: m(pixel_values=px, labels=y).loss),
    "audio": ((_audio, _classes(2)), lambda m, x, y: m(input_values=x, labels=y).loss),
    "ctc": ((_audio, lambda cfg: _ids(cfg, 4) % 15 + 1), lambda m, x, y: m(input_values=x, labels=y).loss),
    "speech": ((lambda cfg: _pixels(cfg)[:, 0, :cfg.num_mel_bins, :2 * cfg.max_source_positions].contiguous(), _ids),
               lambda m, f, ids: m(input_features=f, labels=ids).loss),
    "pair": ((_ids, _pixels), lambda m, ids, px: m(input_ids=ids, pixel_values=px, return_loss=True).loss),
    "inputs-cls": ((_ids,), lambda m, ids: m(inputs=ids, labels=ids[:, 0] % 2).loss),  # (Perceiver's `inputs`)
    "qa": ((_ids, _classes(8), lambda cfg: _randint(8, 5)),  # answer spans: start and end positions
           lambda m, ids, s, e: m(input_ids=ids, start_positions=s, end_positions=e).loss),
    "bbox-token": ((_ids, lambda cfg: _boxes(), lambda cfg: _ids(cfg) % 2),  # a box a token, a label a token
                   lambda m, ids, bb, y: m(input_ids=ids, bbox=bb, labels=y).loss),
    # (the noise that picks the masked patches in the batch: drawn inside, it is torch's draw natively and
    # RepOps' under RepOps, two masks)
    "mae": ((_pixels, lambda cfg: _pixels(cfg).view(2, -1)[:, :(cfg.image_size // cfg.patch_size) ** 2].sigmoid()),
            lambda m, px, noise: m(pixel_values=px, noise=noise).loss),
    "mae-draws": ((_pixels,), lambda m, px: m(pixel_values=px).loss),  # (its noise drawn inside, under the key)
    "s2t": ((lambda cfg: _pixels(cfg)[:, 0, :16, :cfg.input_feat_per_channel].contiguous(), _ids),
            lambda m, f, ids: m(input_features=f, labels=ids).loss),
    "forecast": ((lambda cfg: _series(0, 16, 2), lambda cfg: _series(1, 4, 2)),  # (past 16 steps, future 4)
                 lambda m, x, y: m(past_values=x, future_values=y).loss),
    # (past values with 2 lags before the context of 8, one time feature, every value observed)
    "likelihood": ((lambda cfg: _series(0, 10, 1)[..., 0], lambda cfg: _series(1, 10, 1),
                    lambda cfg: _series(0, 10, 1)[..., 0] * 0 + 1, lambda cfg: _series(2, 4, 1)[..., 0],
                    lambda cfg: _series(2, 4, 2)[..., 1:]),
                   lambda m, pv, pt, pm, fv, ft: m(past_values=pv, past_time_features=pt, past_observed_mask=pm,
                                                   future_values=fv, future_time_features=ft).loss),
    "detect": ((_pixels,), lambda m, px: _detect_loss(m(pixel_values=px))),
    "caption": ((_pixels, _ids), lambda m, px, ids: m(pixel_values=px, input_ids=ids, labels=ids).loss),
}


def _kind(family: str) -> str:
    cls, _, _, *kind = FAMILIES[family]
    return kind[0] if kind else "cls" if "SequenceClassification" in cls else "lm"


def _no_dropout(cfg):
    """Dropout, stochastic depth and layerdrop off, as a user sets them for a step comparable with
    native torch (RepOps draws them from its own generator: a p > 0 drops other units or layers),
    in the sub-configs (CLIP's text and vision towers) too."""
    from transformers import PretrainedConfig
    for k, v in list(vars(cfg).items()):
        if isinstance(v, PretrainedConfig):
            _no_dropout(v)
        elif isinstance(v, float) and ("dropout" in k or k.endswith("_pdrop") or "drop_path" in k
                                       or "drop_connect" in k or k.endswith("layerdrop")):
            setattr(cfg, k, 0.0)


def _model(family: str):
    """(model, its batch, loss(model)) for one family's tiny config."""
    import torch
    import transformers as T
    cls, cfg_name, kw, *_ = FAMILIES[family]
    torch.manual_seed(0)
    cfg = getattr(T, cfg_name)(**kw)
    _no_dropout(cfg)
    model = getattr(T, cls)(cfg).float()
    makers, loss = INPUTS[_kind(family)]
    batch = tuple(make(cfg) for make in makers)
    return model, batch, lambda m: loss(m, *batch)


def _loss_module(model, kind):
    """The family as a job's module: forward(*batch) returns the loss (what program.export takes)."""
    import torch
    loss = INPUTS[kind][1]

    class Loss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = model

        def forward(self, *batch):
            return loss(self.m, *batch)
    return Loss()


def _exported_same_bits(model, kind, batch) -> tuple[bool, list]:
    """The family exported as a job's program (offchain/protocol/program.py: torch.export, folding),
    loaded back and stepped under RepOps: are its loss and every gradient the module's bit for bit?
    And the hand-written backwards export let through (program.DERIVATIVE_BACKWARDS: where they
    are, autograd's derivative replaces them, equal to rounding only)."""
    import torch

    import repops
    from offchain.protocol import program
    module = _loss_module(model, kind)
    data, state = program.export(module, batch)
    derivatives = sorted(f"{c.__module__}.{c.__qualname__}" for c in program._applied_functions(module, batch))
    prog = program.load(data, {k: v.clone() for k, v in state.items()})
    runs = []
    # (a program counts its steps from 1 before it draws, program._Dropout: the module's first step draws
    # under the same key, (seed 0, step 1); a model that draws nothing gives the same bits under any key)
    for m, f in ((prog, prog.loss), (module, module)):
        m.zero_grad(set_to_none=True)
        with repops.deterministic(), repops.dropout_key(0, 1):
            out = f(*batch)
            out.backward()
        runs.append((out.detach(), {k.removeprefix("model.") if m is prog and k.startswith("model.m.") else k: p.grad
                                    for k, p in m.named_parameters(remove_duplicate=False) if p.grad is not None}))
    (lp, gp), (lm, gm) = runs
    same = lambda x, y: torch.equal(x.view(torch.int32), y.view(torch.int32))  # noqa: E731
    return same(lp, lm) and bool(gp) and set(gp) <= set(gm) and all(same(gp[k], gm[k]) for k in gp), derivatives


def _step(model, loss, backend):
    import contextlib

    import repops
    model.zero_grad(set_to_none=True)
    # (inside a dropout key, as a user runs a model that draws: layerdrop's `torch.rand([]) < p` in BART,
    # OPT, Whisper, wav2vec2 draws with p = 0 too; a draw that changes the step, Reformer's LSH
    # rotations, is RepOps' Philox draw here, torch's generator natively)
    with (repops.deterministic(backend) if backend else contextlib.nullcontext()), (
            repops.dropout_key(0, 0) if backend else contextlib.nullcontext()):
        out = loss(model)
        out.backward()
    return [out.detach().clone()] + [None if p.grad is None else p.grad.detach().clone() for p in model.parameters()]


def _f64_error_ratio(model, batch, family, native, cpu) -> float | None:
    """Where max_rel_diff is large the gradient is small and ill-conditioned (a bias before a
    normalisation, a sum that nearly cancels): RepOps' error against the same step in float64 over
    native float32's, the largest over the loss and the gradients (each error floored at one ulp of
    that gradient's scale and at ZERO_BELOW). Rounding keeps it near 1; a wrong answer is orders
    above. None where the family does not run in float64."""
    import copy

    import torch
    try:
        m64 = copy.deepcopy(model).double()
        b64 = tuple(t.double() if t.is_floating_point() else t for t in batch)
        ref = _step(m64, lambda m: INPUTS[_kind(family)][1](m, *b64), None)
    except Exception:  # noqa: BLE001 - an op without a float64 kernel: the ratio is left out
        return None
    if any(r is not None and not bool(torch.isfinite(r).all()) for r in ref):
        return None  # (CANINE in float64: NaN in transformers' own step)
    ratios = []
    for a, b, r in zip(native, cpu, ref):
        if a is not None and r is not None:
            err = lambda x: float((x.double() - r).abs().max()) if r.numel() else 0.0  # noqa: E731
            floor = max(float(r.abs().max()) * 2.0 ** -24, ZERO_BELOW) if r.numel() else ZERO_BELOW
            ratios.append(max(err(b), floor) / max(err(a), floor))
    return max(ratios)


def _ours(e: Exception) -> bool:
    """A refusal by RepOps or Verde (an error saying what to change), not a crash."""
    return type(e).__module__.split(".")[0] in ("repops", "offchain")


def _error(e: Exception) -> str:
    return f"{'' if _ours(e) else 'CRASH '}{type(e).__name__}: {str(e).splitlines()[0][:240] if str(e) else ''}"


def probe(family: str, emu: bool, export: bool = True) -> dict:
    import torch
    start = time.perf_counter()
    row = {"family": family, "model": FAMILIES[family][0]}
    try:
        model, batch, loss = _model(family)
        native, cpu = _step(model, loss, None), _step(model, loss, "cpu")
        if [g is None for g in native] != [g is None for g in cpu]:
            raise AssertionError("RepOps left a different set of parameters without a gradient")
        scale = lambda t: float(t.abs().max()) if t.numel() else 0.0  # noqa: E731
        rel = [float((a - b).abs().max()) / scale(a) for a, b in zip(native, cpu)
               if a is not None and scale(a) > ZERO_BELOW]
        row.update(status="ok", loss_native=float(native[0]), loss_repops=float(cpu[0]), max_rel_diff=max(rel),
                   zero_grads=sum(a is not None and scale(a) <= ZERO_BELOW for a in native[1:]))
        row["f64_error_ratio"] = _f64_error_ratio(model, batch, family, native, cpu)
        if emu:
            dev = _step(model, loss, "cuda-emu")
            row["cuda_emu_same_bits"] = all(
                (a is None and b is None) or torch.equal(a.view(torch.int32), b.view(torch.int32))
                for a, b in zip(cpu, dev))
        if export:
            try:
                row["program_same_bits"], row["derivative_backwards"] = _exported_same_bits(model, _kind(family), batch)
            except Exception as e:  # noqa: BLE001 - refused or not, the family still trains eagerly
                row["export_error"] = _error(e)
    except Exception as e:  # noqa: BLE001 - a probe: every outcome is a row
        row.update(status="refused" if _ours(e) else "crash", error=_error(e))
    row["seconds"] = round(time.perf_counter() - start, 2)
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="*", choices=sorted(FAMILIES), default=None)
    ap.add_argument("--no-emu", action="store_true", help="skip the emulated CUDA kernels")
    ap.add_argument("--no-export", action="store_true", help="skip exporting each family as a job's program")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--update", action="store_true",
                    help="with --only: replace those families' rows in the committed table (after a fix to them)")
    args = ap.parse_args()
    if args.update and (not args.only or args.no_emu or args.no_export):
        ap.error("--update takes --only FAMILY... and every column (no --no-emu, no --no-export)")
    import transformers
    from rich.console import Console
    from rich.table import Table
    from tqdm import tqdm
    rows = [probe(f, not args.no_emu, not args.no_export)
            for f in tqdm(args.only or [f for f in FAMILIES if f not in SLOW], desc="families")]
    t = Table("family", "status", "loss native / RepOps", "max rel diff", "f64 err ratio", "cpu = cuda-emu",
              "program = module", "s",
              "error",
              title=f"Hugging Face families beyond the zoo (transformers {transformers.__version__})")
    for r in rows:
        t.add_row(r["family"], r["status"], f"{r['loss_native']:.6f} / {r['loss_repops']:.6f}" if "loss_native" in r
                  else "", f"{r['max_rel_diff']:.1e}" if "max_rel_diff" in r else "",
                  f"{r['f64_error_ratio']:.1f}" if r.get("f64_error_ratio") is not None else "",
                  str(r.get("cuda_emu_same_bits", "")), str(r.get("program_same_bits", "")), f"{r['seconds']:.1f}",
                  r.get("error", r.get("export_error", "")))
    Console(width=200).print(t)
    if args.update:  # (the other rows, and the command that wrote them, stay)
        table = json.loads(args.out.read_text())
        fresh = {r["family"]: r for r in rows}
        table["families"] = [fresh.pop(r["family"], r) for r in table["families"]] + list(fresh.values())
        table["not_run"] = _not_run()
        args.out.write_text(json.dumps(table, indent=1))
        print(f"updated {', '.join(args.only)} in {args.out}")
    elif not args.only:  # (a partial run never overwrites the committed table)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"command": "python benchmarks/hf_families.py",
                                        "transformers": transformers.__version__, "zero_below": ZERO_BELOW,
                                        "not_run": _not_run(),
                                        "families": rows}, indent=1))
        print(f"wrote {args.out}")
    return 1 if any(r["status"] == "crash" or "CRASH" in r.get("export_error", "") or r.get("cuda_emu_same_bits") is False
                    or r.get("program_same_bits") is False and not r.get("derivative_backwards") for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
