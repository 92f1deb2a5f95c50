/* One line per recipe, for `mlaref recipe list`: which kernel a recipe models. The settings and
 * the evidence behind them are in recipe.c (built-ins) and gpu/fast/fast_recipe.c (the fast
 * kernel's recipes, listed here too so that `recipe list` describes every name it prints);
 * docs/recipes.md has the full table. */
#include <string.h>

#include "mlr_recipe.h"

static const struct {
  const char *name, *text;
} DESCRIPTIONS[] = {
    {"fp32-seq", "the plain fp32 contract: bf16 Q, KV dequantized to fp32 operands, fp32 fma "
                 "chains, base-e exp over 32-token blocks, fp32 P, bf16 output"},
    {"triton-fp8-single", "the seeds' Triton single-pass fp8 kernel (its H200 PTX): fp16 "
                          "operands and P, tl.exp as exp2, PV folded into the accumulator"},
    {"triton-fp8-split", "the seeds' Triton split-K fp8 kernel: triton-fp8-single per split, 8 "
                         "fixed splits, normalized partials, running-max merge"},
    {"aiter-a8w8-ps", "AITER's persistent a8w8 MLA decode (gfx950): fp8 Q (dynamic) and KV, "
                      "scales folded, fp8 P, metadata-v1 splits, AITER's merge"},
    {"aiter-a16w8-ps", "AITER's persistent a16w8 MLA decode: bf16 Q with fp8 KV, bf16 operands "
                       "and P, a8w8's splits and merge"},
    {"aiter-bf16-np", "AITER's bf16 non-persistent MLA decode: bf16 operands and P, 16 fixed "
                      "splits, running-max merge"},
    {"torch-bmm-bf16", "the seeds' PyTorch reference: bmm in bf16, bf16 logits, fp32 softmax "
                       "over the whole row, bf16 P"},
    {"aiter-test-ref", "AITER's test reference: fp8 Q (dynamic), fp32 einsum logits, global max, "
                       "P to fp8 and back, PV in fp32"},
    {"triton-fp8-single-sm90", "the seeds' single-pass kernel as the H200 runs it: fp16 mma.sync "
                               "in Triton's order, ex2.approx, tl.sum's tree, div.full, logf"},
    {"triton-fp8-split-sm90", "the seeds' split-K kernel as the H200 runs it: the above per "
                              "split, 8 fixed splits, the merge's exps on ex2.approx"},
    {"aiter-triton-decode-dot", "AITER's Triton MLA decode, its grouped tl.dot path on NVIDIA "
                                "(H200 PTX): bf16 mma.sync, ex2.approx, div.full, splits "
                                "cdiv(L, N)"},
    {"aiter-triton-decode",
     "AITER's Triton MLA decode, its per-head tl.sum stage (ROCm's path; H200 "
     "PTX): bf16 lane chains, 4-token blocks, fp32 P, splits cdiv(L, N)"},
    {"flashmla-fp8", "FlashMLA's dense fp8 decode (H200 PTX): wgmma fp8, FlashAttention-2 softmax, "
                     "its tile scheduler and combine, lg2.approx in the lse"},
    {"flashmla-bf16", "FlashMLA's dense bf16 decode (H200 PTX): bf16 wgmma, two warpgroups in "
                      "seesaw, base-2 combine, lg2.approx in the lse"},
    {"fast-a16w8", "mlaref's fast H200 kernel, bf16 Q with fp8 KV: fp16 mma, ex2.approx, "
                   "128-token blocks, waves splits"},
    {"fast-a8w8", "the fast H200 kernel with fp8 Q (static scale, absmax 6) and fp8 KV"},
    {"fast-wgmma-a8w8", "the fast H200 kernel with the logits on wgmma's fp8 unit: e4m3 Q, OCP "
                        "e4m3 KV"},
    {"fast-wgmma-fp8", "the fast H200 kernel with both products on wgmma's fp8 unit: e4m3 Q, KV "
                       "and P (as FlashMLA's fp8)"},
    {"fast-a16w16", "the fast H200 kernel on bf16 KV with bf16 Q: 64-token blocks"},
    {"fast-a8w16", "the fast H200 kernel on bf16 KV with fp8 Q (static scale): 64-token blocks"},
    {"fast-mi300-a16w8", "the fast kernel's AMD variant (MI300, CDNA3 bf16 MFMA), bf16 Q with fp8 "
                         "KV, splits for 304 CUs"},
    {"fast-mi300-a8w8", "the fast kernel's AMD variant with e4m3fnuz Q (static scale) and fp8 KV"},
};

const char *mlr_recipe_builtin_description(const char *name) {
  for (size_t i = 0; name && i < sizeof DESCRIPTIONS / sizeof DESCRIPTIONS[0]; i++)
    if (strcmp(name, DESCRIPTIONS[i].name) == 0) return DESCRIPTIONS[i].text;
  return NULL;
}
