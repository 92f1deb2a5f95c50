/* The wrong kernels of the discrimination table (mlr_discriminate.h): each a small, plausible
 * change to a correct kernel, computed exactly as that kernel would compute it. Three kinds:
 * a mistake in the output (the model's output, then changed), a fault inside the kernel (the
 * model with an mlr_emu_fault), and a kernel that reads its inputs wrongly (the model run on the
 * inputs as the wrong kernel reads them: a page table entry off, a scale left out, a mask
 * ignored), which is the same computation as the faulty kernel's, bit for bit. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mlr_discriminate.h"
#include "mlr_emu_ops.h"
#include "mlr_emulate.h"
#include "mlr_formats.h"

#define DV MLR_EMU_V_DIM
#define DK MLR_EMU_QK_DIM

typedef enum kind { OUT, FAULT, READ } kind;

typedef enum out_mistake { ZEROS, Q_OVER_24, SWAP_B01, COPY_H0, LSE_BASE2 } out_mistake;

typedef enum read_mistake {
  PAGE_OFF_BY_ONE,
  LAST_PAGE_WHOLE,
  CAUSAL_IGNORED,
  V_SCALE_OMITTED,
  V_SCALE_IGNORED,
  K_SCALE_FOR_V,
  KV_SCALES_SWAPPED,
  Q_SCALE_OMITTED,
  SM_SCALE_IGNORED,
  HEADS_MOD_16,
  FP8_FLAVOUR
} read_mistake;

typedef struct mutant {
  const char *name;
  kind k;
  int what; /* out_mistake, mlr_emu_fault or read_mistake */
} mutant;

static const mutant M[MLR_DISC_WRONG] = {
    {"all zeros", OUT, ZEROS},
    {"q[..., :512] / 24", OUT, Q_OVER_24},
    {"rope part of the dot dropped", FAULT, MLR_FAULT_DROP_ROPE},
    {"sm_scale = 1/sqrt(512)", FAULT, MLR_FAULT_SM_SCALE_512},
    {"kv_scale applied twice", FAULT, MLR_FAULT_KV_SCALE_TWICE},
    {"kv_scale not applied", FAULT, MLR_FAULT_KV_SCALE_NONE},
    {"last token of each split skipped", FAULT, MLR_FAULT_SKIP_LAST},
    {"split lse in log2 where ln is meant", FAULT, MLR_FAULT_LSE_LOG2},
    {"P not normalized", FAULT, MLR_FAULT_P_UNNORMALIZED},
    {"merge without rescaling by the running max", FAULT, MLR_FAULT_MERGE_NO_RESCALE},
    {"batches 0 and 1 swapped", OUT, SWAP_B01},
    {"head 0 copied to head 1", OUT, COPY_H0},
    {"first KV token of each batch skipped", FAULT, MLR_FAULT_SKIP_FIRST},
    {"last KV token of each batch dropped", FAULT, MLR_FAULT_DROP_LAST},
    {"last KV token of batch 0 dropped", FAULT, MLR_FAULT_DROP_LAST_B0},
    {"causal mask one token late", FAULT, MLR_FAULT_CAUSAL_SHIFT},
    {"causal mask ignored", READ, CAUSAL_IGNORED},
    {"split end inclusive (a token read twice)", FAULT, MLR_FAULT_SPLIT_EDGE_TWICE},
    {"merge leaves out the last split", FAULT, MLR_FAULT_MERGE_DROP_LAST},
    {"last page read through the previous table entry", READ, PAGE_OFF_BY_ONE},
    {"kv_last_page_len ignored (last page read whole)", READ, LAST_PAGE_WHOLE},
    {"v_scale omitted (V read at scale 1)", READ, V_SCALE_OMITTED},
    {"v_scale ignored (V read at kv_scale)", READ, V_SCALE_IGNORED},
    {"k_scale used for V", READ, K_SCALE_FOR_V},
    {"k_scale and v_scale swapped", READ, KV_SCALES_SWAPPED},
    {"q_scale omitted (fp8 Q read as codes)", READ, Q_SCALE_OMITTED},
    {"sm_scale given ignored (1/sqrt(576) used)", READ, SM_SCALE_IGNORED},
    {"heads past 16 read head h mod 16's query", READ, HEADS_MOD_16},
    {"fp8 KV decoded as the other e4m3 flavour", READ, FP8_FLAVOUR},
    {"lse returned in base 2", OUT, LSE_BASE2},
};

const char *mlr_disc_wrong_name(int k) { return k >= 0 && k < MLR_DISC_WRONG ? M[k].name : "?"; }

/* the arrays a misreading owns, freed after the model has run on them */
typedef struct misread {
  mlr_inputs in;
  int32_t *idx, *last;
  void *q;
} misread;

static void misread_free(misread *m) {
  free(m->idx);
  free(m->last);
  free(m->q);
}

/* a page table for an unpaged layout: one token a page, so a table entry is a row */
static int token_table(misread *m, const mlr_inputs *in) {
  m->idx = malloc((size_t)(in->N > 0 ? in->N : 1) * sizeof *m->idx);
  m->last = malloc((size_t)in->B * sizeof *m->last);
  if (!m->idx || !m->last) return -1;
  for (int64_t i = 0; i < in->N; i++) m->idx[i] = (int32_t)i;
  for (int64_t b = 0; b < in->B; b++) m->last[b] = 1;
  m->in.kv_indices = m->idx;
  m->in.kv_last_page_len = m->last;
  m->in.page = 1;
  m->in.P = in->N;
  return 0;
}

/* a copy of the page table (and last-page lengths) to change */
static int own_table(misread *m, const mlr_inputs *in) {
  if (!in->kv_indices) return token_table(m, in);
  const int64_t np = in->kv_indptr[in->B];
  m->idx = malloc((size_t)(np > 0 ? np : 1) * sizeof *m->idx);
  m->last = malloc((size_t)in->B * sizeof *m->last);
  if (!m->idx || !m->last) return -1;
  memcpy(m->idx, in->kv_indices, (size_t)np * sizeof *m->idx);
  memcpy(m->last, in->kv_last_page_len, (size_t)in->B * sizeof *m->last);
  m->in.kv_indices = m->idx;
  m->in.kv_last_page_len = m->last;
  return 0;
}

/* Q with heads h >= 16 holding head h mod 16's row (a kernel that indexes Q in groups of 16) */
static int heads_mod_16(misread *m, const mlr_inputs *in) {
  const size_t w = in->q8 ? 1 : 2, row = DK * w;
  m->q = malloc((size_t)(in->T * in->H) * row);
  if (!m->q) return -1;
  const char *src = in->q8 ? (const char *)in->q8 : (const char *)in->q;
  for (int64_t t = 0; t < in->T; t++)
    for (int64_t h = 0; h < in->H; h++)
      memcpy((char *)m->q + (size_t)(t * in->H + h) * row, src + (size_t)(t * in->H + h % 16) * row,
             row);
  if (in->q8)
    m->in.q8 = m->q;
  else
    m->in.q = m->q;
  return 0;
}

/* the inputs as the wrong kernel reads them; returns 0, 1 where the mistake cannot show on these
 * inputs (nothing to misread), -1 out of memory */
static int misread_inputs(read_mistake w, const mlr_inputs *in, misread *m) {
  memset(m, 0, sizeof *m);
  m->in = *in;
  mlr_inputs *x = &m->in;
  switch (w) {
  case PAGE_OFF_BY_ONE: /* each batch's last page through its previous page's entry */
    if (own_table(m, in)) return -1;
    for (int64_t b = 0; b < in->B; b++) {
      const int64_t p0 = x->kv_indptr[b], p1 = x->kv_indptr[b + 1];
      if (p1 - p0 >= 2) m->idx[p1 - 1] = m->idx[p1 - 2];
    }
    return 0;
  case LAST_PAGE_WHOLE:
    if (!in->kv_indices) return 1;
    if (own_table(m, in)) return -1;
    for (int64_t b = 0; b < in->B; b++) m->last[b] = (int32_t)in->page;
    return 0;
  case CAUSAL_IGNORED:
    x->noncausal = 1;
    return 0;
  case V_SCALE_OMITTED:
    x->v_scale = 1.0f;
    return 0;
  case V_SCALE_IGNORED: /* the contract's default in its place */
    x->v_scale = 0.0f;
    return 0;
  case K_SCALE_FOR_V:
    x->v_scale = mlr_inputs_k_scale(in);
    return 0;
  case KV_SCALES_SWAPPED: /* the rope columns follow K's scale unless kpe_scale is given */
    x->k_scale = mlr_inputs_v_scale(in);
    x->v_scale = mlr_inputs_k_scale(in);
    return 0;
  case Q_SCALE_OMITTED:
    if (!in->q8) return 1;
    x->q_scale = 1.0f;
    return 0;
  case SM_SCALE_IGNORED:
    x->sm_scale = 0.0;
    return 0;
  case HEADS_MOD_16:
    if (in->H <= 16) return 1;
    return heads_mod_16(m, in) ? -1 : 0;
  case FP8_FLAVOUR:
    if (in->kv_format == MLR_FMT_BF16) return 1;
    x->kv_format = in->kv_format == MLR_FMT_E4M3 ? MLR_FMT_E4M3FNUZ : MLR_FMT_E4M3;
    return 0;
  }
  return 1;
}

/* the model's outputs copied into out (o bf16 codes, lse as the kernel returns it) */
static mlr_status copy_model(const mlr_emu_result *model, int64_t n, int64_t nl,
                             mlr_disc_out *out) {
  out->o = malloc((size_t)(n > 0 ? n : 1) * 2);
  out->lse = malloc((size_t)(nl > 0 ? nl : 1) * sizeof(float));
  if (!out->o || !out->lse) return MLR_ENOMEM;
  memcpy(out->o, model->o, (size_t)n * 2);
  memcpy(out->lse, model->lse_out, (size_t)nl * sizeof(float));
  return MLR_OK;
}

/* a mistake in the output: the model's output, changed */
static void change_output(out_mistake w, const mlr_recipe *r, const mlr_inputs *in,
                          mlr_disc_out *out) {
  const int64_t H = in->H, T = in->T;
  if (w == ZEROS) {
    memset(out->o, 0, (size_t)(T * H * DV) * 2);
    memset(out->lse, 0, (size_t)(T * H) * sizeof(float));
  } else if (w == Q_OVER_24) { /* bf16(q / 24) of the first 512 columns: the right size and
                                  scale, with no attention in it */
    for (int64_t t = 0; t < T * H; t++)
      for (int d = 0; d < DV; d++) {
        const float q = in->q8
                            ? mlr_decode((mlr_format)in->q_format, in->q8[t * DK + d]) * in->q_scale
                            : mlr_bits_f32((uint32_t)in->q[t * DK + d] << 16);
        out->o[t * DV + d] = (uint16_t)mlr_encode_f32(q / 24.0f, MLR_FMT_BF16, MLR_RND_NEAREST_EVEN,
                                                      MLR_OVF_NONSAT, 0);
      }
  } else if (w == SWAP_B01 && in->B > 1) { /* the first query tokens of batches 0 and 1 */
    const int64_t t0 = in->qo_indptr[0], t1 = in->qo_indptr[1];
    for (int64_t h = 0; h < H; h++) {
      uint16_t tmp[DV];
      memcpy(tmp, out->o + (t0 * H + h) * DV, sizeof tmp);
      memcpy(out->o + (t0 * H + h) * DV, out->o + (t1 * H + h) * DV, sizeof tmp);
      memcpy(out->o + (t1 * H + h) * DV, tmp, sizeof tmp);
      const float l = out->lse[t0 * H + h];
      out->lse[t0 * H + h] = out->lse[t1 * H + h];
      out->lse[t1 * H + h] = l;
    }
  } else if (w == COPY_H0) { /* every token's head 1 = its head 0 */
    for (int64_t t = 0; H > 1 && t < T; t++) {
      memcpy(out->o + (t * H + 1) * DV, out->o + t * H * DV, DV * 2);
      out->lse[t * H + 1] = out->lse[t * H];
    }
  } else if (w == LSE_BASE2) { /* log2 of the sum where ln is meant (ln where a base-2 recipe
                                   means log2): one binary32 multiply */
    const float f = r->out_lse_base == MLR_EXP_2 ? MLR_EMU_LN2_F : (float)MLR_EMU_LOG2E_D;
    for (int64_t i = 0; i < T * H; i++) out->lse[i] = out->lse[i] * f;
  }
}

/* the model of r on in with a fault, its outputs adopted by out */
static mlr_status run_model(const mlr_recipe *r, const mlr_inputs *in, int fault, int threads,
                            mlr_disc_out *out, mlr_error *err) {
  const mlr_emu_opts opts = {threads, 0, fault, 0};
  mlr_emu_result res;
  const mlr_status st = mlr_emulate(r, in, &opts, &res, err);
  if (st != MLR_OK) return st;
  out->o = res.o;
  out->lse = res.lse_out;
  res.o = NULL;
  res.lse_out = NULL;
  mlr_emu_result_free(&res);
  return MLR_OK;
}

mlr_status mlr_disc_wrong_output(int k, const mlr_recipe *r, const mlr_inputs *in,
                                 const mlr_emu_result *model, int threads, mlr_disc_out *out,
                                 mlr_error *err) {
  memset(out, 0, sizeof *out);
  if (k < 0 || k >= MLR_DISC_WRONG)
    return mlr_error_set(err, MLR_EINVAL, "wrong kernel %d: valid 0..%d", k, MLR_DISC_WRONG - 1);
  if (r->out_format != MLR_OUT_BF16)
    return mlr_error_set(err, MLR_EINVAL,
                         "recipe '%s': the wrong kernels are made from a bf16 output", r->name);
  const mutant *m = &M[k];
  mlr_status st = MLR_OK;
  if (m->k == FAULT)
    st = run_model(r, in, m->what, threads, out, err);
  else if (m->k == READ) {
    misread mr;
    int how = misread_inputs((read_mistake)m->what, in, &mr);
    if (how < 0)
      st = mlr_error_set(err, MLR_ENOMEM, "out of memory for a wrong kernel's inputs");
    else if (how == 0 && (st = run_model(r, &mr.in, 0, threads, out, err)) == MLR_EINVAL)
      how = 1; /* the recipe cannot read the inputs that way (a matrix unit's format) */
    if (how == 1) {
      st = copy_model(model, in->T * in->H * DV, in->T * in->H, out);
      if (st != MLR_OK) st = mlr_error_set(err, st, "out of memory for a wrong kernel's output");
    }
    misread_free(&mr);
  } else if ((st = copy_model(model, in->T * in->H * DV, in->T * in->H, out)) != MLR_OK)
    st = mlr_error_set(err, st, "out of memory for a wrong kernel's output");
  else
    change_output((out_mistake)m->what, r, in, out);
  if (st != MLR_OK) mlr_disc_out_free(out);
  return st;
}

void mlr_disc_out_free(mlr_disc_out *out) {
  free(out->o);
  free(out->lse);
  out->o = NULL;
  out->lse = NULL;
}
