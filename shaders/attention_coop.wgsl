// Scaled dot-product attention of a prompt on the matrix units (cooperative
// matrices, 16x16x16, f16 operands, f32 sums): attention_rows.wgsl's job for
// adapters that have them, with d and dv multiples of 16 up to DMAX.
// Q [Sq, H, d], K [M, Hkv, d], V [M, Hkv, dv], O [Sq, H, dv].
// a = (Sq, H, Hkv, d), b = (dv, kv_len, q_pos, mask: 0 none, 1 causal, 2 sliding),
// c.x = window, d.x = scale (f32). Workgroup g: rows (g / H) * BR .., head g % H;
// subgroup s of its four takes rows 16 s .. 16 s + 16.
// Two passes over the keys the workgroup's rows attend to, in tiles of TK
// keys read once into workgroup memory for all rows: the first finds each
// row's largest scaled score m, the second adds P V with P = exp(s - m)
// rounded to f16 (so every probability is at most 1 and the P V sums need no
// rescaling) and the row's sum l of those P; O = (P V) / l. Q, K and V are
// rounded to f16 (values past 65504 become infinite); scores and sums are f32.
// `key_range` is appended (attention_keys.wgsl).
@group(0) @binding(0) var<storage, read> q: array<f32>;
@group(0) @binding(1) var<storage, read> kc: array<f32>;
@group(0) @binding(2) var<storage, read> vc: array<f32>;
@group(0) @binding(3) var<storage, read_write> o: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

const THREADS: u32 = 128u;
const BR: u32 = 64u;
const TK: u32 = 32u;
const DMAX: u32 = 128u;
// Row stride in f16 of the Q, K and V tiles: DMAX plus 8 (16 bytes), so that
// consecutive rows start in different banks.
const LD: u32 = 136u;
// The same in elements of `kv` (four f16 each): the fragment loads take the
// stride in these.
const LD4: u32 = 34u;
// Offset of the V tile in `kv`.
const V_AT: u32 = 4352u; // TK * LD
// Row stride in f16 of a subgroup's probabilities.
const PLD: u32 = 40u;
const NEG: f32 = -3.4028235e38;
// The K and V tiles; before the first tile, the workgroup's Q rows. Offsets
// below are in f16 (all multiples of 4); the tiles are vec4<f16> so that each
// fill stores four values at once.
var<workgroup> kv: array<vec4<f16>, 2176>; // (BR * LD = 2 * TK * LD) / 4
// A subgroup's 16 x TK scores (f32), later its 16 x 16 output squares.
var<workgroup> ss: array<f32, 2048>; // 4 * 16 * TK
// A subgroup's 16 x TK probabilities (f16).
var<workgroup> ps: array<f16, 2560>; // 4 * 16 * PLD
// Per thread: its half row's largest score, then its half row's sum.
var<workgroup> halves: array<f32, 128>;
// Per row of the workgroup: the sum l of its probabilities.
var<workgroup> row_sums: array<f32, 64>;

// Scores of the subgroup's 16 query rows (fragments q0.. of d/16 x 16
// dimensions) against the 16 keys of the K tile from `key0`.
fn scores(
    q0: coop_mat16x16<f16, A>, q1: coop_mat16x16<f16, A>,
    q2: coop_mat16x16<f16, A>, q3: coop_mat16x16<f16, A>,
    q4: coop_mat16x16<f16, A>, q5: coop_mat16x16<f16, A>,
    q6: coop_mat16x16<f16, A>, q7: coop_mat16x16<f16, A>,
    key0: u32,
) -> coop_mat16x16<f32, C> {
    let d = p.a.w;
    let at = key0 * LD;
    var s: coop_mat16x16<f32, C>;
    s = coopMultiplyAdd(q0, coopLoad<coop_mat16x16<f16, B>>(&kv[at / 4u], LD4), s);
    if d > 16u {
        s = coopMultiplyAdd(q1, coopLoad<coop_mat16x16<f16, B>>(&kv[(at + 16u) / 4u], LD4), s);
    }
    if d > 32u {
        s = coopMultiplyAdd(q2, coopLoad<coop_mat16x16<f16, B>>(&kv[(at + 32u) / 4u], LD4), s);
    }
    if d > 48u {
        s = coopMultiplyAdd(q3, coopLoad<coop_mat16x16<f16, B>>(&kv[(at + 48u) / 4u], LD4), s);
    }
    if d > 64u {
        s = coopMultiplyAdd(q4, coopLoad<coop_mat16x16<f16, B>>(&kv[(at + 64u) / 4u], LD4), s);
    }
    if d > 80u {
        s = coopMultiplyAdd(q5, coopLoad<coop_mat16x16<f16, B>>(&kv[(at + 80u) / 4u], LD4), s);
    }
    if d > 96u {
        s = coopMultiplyAdd(q6, coopLoad<coop_mat16x16<f16, B>>(&kv[(at + 96u) / 4u], LD4), s);
    }
    if d > 112u {
        s = coopMultiplyAdd(q7, coopLoad<coop_mat16x16<f16, B>>(&kv[(at + 112u) / 4u], LD4), s);
    }
    return s;
}

// acc + P (the subgroup's 16 x TK probabilities, as two 16-key halves pa0,
// pa1) times the V tile's output dimensions c0 .. c0 + 16.
fn add_pv(
    acc: coop_mat16x16<f32, C>,
    pa0: coop_mat16x16<f16, A>,
    pa1: coop_mat16x16<f16, A>,
    c0: u32,
) -> coop_mat16x16<f32, C> {
    let v0 = coopLoadT<coop_mat16x16<f16, B>>(&kv[(V_AT + c0) / 4u], LD4);
    let v1 = coopLoadT<coop_mat16x16<f16, B>>(&kv[(V_AT + 16u * LD + c0) / 4u], LD4);
    return coopMultiplyAdd(pa1, v1, coopMultiplyAdd(pa0, v0, acc));
}

// v rounded to f16, to kv[at .. at + 4].
fn put4(at: u32, v: vec4<f32>) {
    kv[at / 4u] = vec4<f16>(v);
}

// Rows j0 .. j0 + TK of the cache `src` (K when `is_v` is false, else V) for
// KV head kvh, `width` values a row, as f16 into the tile at `at`; keys from
// `hi` on are zero.
fn load_tile(t: u32, j0: u32, hi: u32, kvh: u32, width: u32, is_v: bool, at: u32) {
    let quads = width / 4u;
    let stride = p.a.z * width;
    for (var e = t; e < TK * quads; e += THREADS) {
        let jj = e / quads;
        let c = (e % quads) * 4u;
        var v = vec4<f32>();
        if j0 + jj < hi {
            let b = (j0 + jj) * stride + kvh * width + c;
            if is_v {
                v = vec4<f32>(vc[b], vc[b + 1u], vc[b + 2u], vc[b + 3u]);
            } else {
                v = vec4<f32>(kc[b], kc[b + 1u], kc[b + 2u], kc[b + 3u]);
            }
        }
        put4(at + jj * LD + c, v);
    }
}

// Output square `acc` (the subgroup's rows, dimensions c0 .. c0 + 16) divided
// by each row's sum, to O; rows past Sq are skipped.
fn store_out(acc: coop_mat16x16<f32, C>, sg: u32, lane: u32, i0: u32, h: u32, c0: u32) {
    coopStoreT(acc, &ss[sg * 512u], 16u);
    workgroupBarrier();
    let dv = p.b.x;
    for (var e = lane; e < 256u; e += 32u) {
        let i = i0 + sg * 16u + e / 16u;
        if i < p.a.x {
            let l = row_sums[sg * 16u + e / 16u];
            o[(i * p.a.y + h) * dv + c0 + e % 16u] = select(0.0, ss[sg * 512u + e] / l, l > 0.0);
        }
    }
    workgroupBarrier();
}

@compute @workgroup_size(128)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let sq = p.a.x;
    let heads = p.a.y;
    let d = p.a.w;
    let dv = p.b.x;
    let g = flat_group(wid);
    let h = g % heads;
    let i0 = (g / heads) * BR;
    let kvh = h / (heads / p.a.z);
    let scale = bitcast<f32>(p.d.x);
    let sg = t / 32u;
    let lane = t % 32u;
    // This thread's half row of the scores: row r of its subgroup, keys
    // 16 half .. 16 half + 16 of each tile.
    let r = lane / 2u;
    let half = lane % 2u;
    let row = i0 + sg * 16u + r;
    let row_ok = row < sq;
    let range = key_range(row);

    let quads = d / 4u;
    for (var e = t; e < BR * quads; e += THREADS) {
        let rr = e / quads;
        let c = (e % quads) * 4u;
        var v = vec4<f32>();
        if i0 + rr < sq {
            let b = ((i0 + rr) * heads + h) * d + c;
            v = vec4<f32>(q[b], q[b + 1u], q[b + 2u], q[b + 3u]);
        }
        put4(rr * LD + c, v);
    }
    workgroupBarrier();
    let qa = sg * 16u * LD;
    let q0 = coopLoadT<coop_mat16x16<f16, A>>(&kv[qa / 4u], LD4);
    var q1: coop_mat16x16<f16, A>;
    var q2: coop_mat16x16<f16, A>;
    var q3: coop_mat16x16<f16, A>;
    var q4: coop_mat16x16<f16, A>;
    var q5: coop_mat16x16<f16, A>;
    var q6: coop_mat16x16<f16, A>;
    var q7: coop_mat16x16<f16, A>;
    if d > 16u {
        q1 = coopLoadT<coop_mat16x16<f16, A>>(&kv[(qa + 16u) / 4u], LD4);
    }
    if d > 32u {
        q2 = coopLoadT<coop_mat16x16<f16, A>>(&kv[(qa + 32u) / 4u], LD4);
    }
    if d > 48u {
        q3 = coopLoadT<coop_mat16x16<f16, A>>(&kv[(qa + 48u) / 4u], LD4);
    }
    if d > 64u {
        q4 = coopLoadT<coop_mat16x16<f16, A>>(&kv[(qa + 64u) / 4u], LD4);
    }
    if d > 80u {
        q5 = coopLoadT<coop_mat16x16<f16, A>>(&kv[(qa + 80u) / 4u], LD4);
    }
    if d > 96u {
        q6 = coopLoadT<coop_mat16x16<f16, A>>(&kv[(qa + 96u) / 4u], LD4);
    }
    if d > 112u {
        q7 = coopLoadT<coop_mat16x16<f16, A>>(&kv[(qa + 112u) / 4u], LD4);
    }

    // Row ranges only grow with the row: the tiles span the first row's lo
    // to the last row's hi.
    let lo = key_range(i0).x;
    let hi = key_range(min(i0 + BR, sq) - 1u).y;
    let sa = sg * 512u;
    let own = sa + r * TK + half * 16u;

    // Pass 1: each row's largest scaled score.
    var m = NEG;
    for (var j0 = lo; j0 < hi; j0 += TK) {
        // Every subgroup is done with the previous tile (or its Q rows).
        workgroupBarrier();
        load_tile(t, j0, hi, kvh, d, false, 0u);
        workgroupBarrier();
        coopStoreT(scores(q0, q1, q2, q3, q4, q5, q6, q7, 0u), &ss[sa], TK);
        coopStoreT(scores(q0, q1, q2, q3, q4, q5, q6, q7, 16u), &ss[sa + 16u], TK);
        workgroupBarrier();
        for (var jj = 0u; jj < 16u; jj++) {
            let j = j0 + half * 16u + jj;
            if row_ok && j >= range.x && j < range.y {
                m = max(m, ss[own + jj] * scale);
            }
        }
    }
    halves[t] = m;
    workgroupBarrier();
    m = max(halves[t], halves[t ^ 1u]);

    // Pass 2: P V and the sums of P.
    var l = 0.0;
    var o0: coop_mat16x16<f32, C>;
    var o1: coop_mat16x16<f32, C>;
    var o2: coop_mat16x16<f32, C>;
    var o3: coop_mat16x16<f32, C>;
    var o4: coop_mat16x16<f32, C>;
    var o5: coop_mat16x16<f32, C>;
    var o6: coop_mat16x16<f32, C>;
    var o7: coop_mat16x16<f32, C>;
    let pa = sg * 16u * PLD;
    for (var j0 = lo; j0 < hi; j0 += TK) {
        workgroupBarrier();
        load_tile(t, j0, hi, kvh, d, false, 0u);
        load_tile(t, j0, hi, kvh, dv, true, V_AT);
        workgroupBarrier();
        coopStoreT(scores(q0, q1, q2, q3, q4, q5, q6, q7, 0u), &ss[sa], TK);
        coopStoreT(scores(q0, q1, q2, q3, q4, q5, q6, q7, 16u), &ss[sa + 16u], TK);
        workgroupBarrier();
        for (var jj = 0u; jj < 16u; jj++) {
            let j = j0 + half * 16u + jj;
            var pj = 0.0;
            if row_ok && j >= range.x && j < range.y {
                pj = exp(ss[own + jj] * scale - m);
            }
            let ph = f16(pj);
            l += f32(ph);
            ps[pa + r * PLD + half * 16u + jj] = ph;
        }
        workgroupBarrier();
        let pa0 = coopLoadT<coop_mat16x16<f16, A>>(&ps[pa], PLD);
        let pa1 = coopLoadT<coop_mat16x16<f16, A>>(&ps[pa + 16u], PLD);
        o0 = add_pv(o0, pa0, pa1, 0u);
        if dv > 16u {
            o1 = add_pv(o1, pa0, pa1, 16u);
        }
        if dv > 32u {
            o2 = add_pv(o2, pa0, pa1, 32u);
        }
        if dv > 48u {
            o3 = add_pv(o3, pa0, pa1, 48u);
        }
        if dv > 64u {
            o4 = add_pv(o4, pa0, pa1, 64u);
        }
        if dv > 80u {
            o5 = add_pv(o5, pa0, pa1, 80u);
        }
        if dv > 96u {
            o6 = add_pv(o6, pa0, pa1, 96u);
        }
        if dv > 112u {
            o7 = add_pv(o7, pa0, pa1, 112u);
        }
    }
    // No thread reads `halves` as maxima any more.
    workgroupBarrier();
    halves[t] = l;
    workgroupBarrier();
    if half == 0u {
        row_sums[sg * 16u + r] = l + halves[t + 1u];
    }
    workgroupBarrier();
    store_out(o0, sg, lane, i0, h, 0u);
    if dv > 16u {
        store_out(o1, sg, lane, i0, h, 16u);
    }
    if dv > 32u {
        store_out(o2, sg, lane, i0, h, 32u);
    }
    if dv > 48u {
        store_out(o3, sg, lane, i0, h, 48u);
    }
    if dv > 64u {
        store_out(o4, sg, lane, i0, h, 64u);
    }
    if dv > 80u {
        store_out(o5, sg, lane, i0, h, 80u);
    }
    if dv > 96u {
        store_out(o6, sg, lane, i0, h, 96u);
    }
    if dv > 112u {
        store_out(o7, sg, lane, i0, h, 112u);
    }
}
