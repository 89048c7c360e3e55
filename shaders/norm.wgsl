// One workgroup per row of D values. a = (rows, D, mode, _), b.x = eps (f32).
// mode & 3: 0 RmsNorm * g, 1 RmsNorm * (1 + g), 2 LayerNorm * g + bias,
// 3 LayerNorm * g. mode & 4: the row is x + r (a residual add), also written
// to s. mode & 8 (one row, D a multiple of 32): the output also as the 8-bit
// blocks of the integer-dot matvec into xq (q8_block.wgsl and q8_parts.wgsl,
// appended; g.x = a NaN), so its product needs no quantizing dispatch of its
// own; the blocks among the values a thread holds are written from registers.
// `reduce_sum` is appended (reduce_sg.wgsl with subgroups,
// reduce_wg.wgsl without); its `Lanes` are this entry point's extra builtins.
// Each thread keeps its first NV groups of 4 values in registers (rows up to
// 4 * NV * WG values are read once, with all loads in flight together);
// values past those are read again in the later passes.
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> r: array<f32>;
@group(0) @binding(2) var<storage, read> g: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(5) var<storage, read_write> s: array<f32>;
@group(0) @binding(6) var<storage, read_write> xq: array<vec4<u32>>;
@group(0) @binding(7) var<uniform> p: Params;

const WG: u32 = 256u;
const NV: u32 = 4u;
const Q8_WG: u32 = WG;

// Values k .. k + 4 of the row at `base` (x + r when adding), zero past D.
fn load4(base: u32, k: u32, d: u32, skip: bool) -> vec4<f32> {
    var v = vec4<f32>();
    for (var i = 0u; i < 4u; i++) {
        if k + i < d {
            v[i] = x[base + k + i];
            if skip {
                v[i] += r[base + k + i];
            }
        }
    }
    return v;
}

// Writes the normalized values k .. k + 4 (those below D) and returns them
// (zero past D).
fn store4(base: u32, k: u32, d: u32, v: vec4<f32>, mean: f32, inv: f32, mode: u32) -> vec4<f32> {
    var out = vec4<f32>();
    for (var i = 0u; i < 4u; i++) {
        let kk = k + i;
        if kk < d {
            let u = (v[i] - mean) * inv;
            switch mode {
                case 1u: { out[i] = u * (1.0 + g[kk]); }
                case 2u: { out[i] = u * g[kk] + bias[kk]; }
                default: { out[i] = u * g[kk]; }
            }
            y[base + kk] = out[i];
        }
    }
    return out;
}

@compute @workgroup_size(256)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) t: u32,
    lanes: Lanes,
) {
    let row = flat_group(wid);
    let d = select(0u, p.a.y, row < p.a.x);
    let mode = p.a.z & 3u;
    let skip = (p.a.z & 4u) != 0u;
    let eps = bitcast<f32>(p.b.x);
    let base = row * p.a.y;
    let held = 4u * NV * WG;
    var v: array<vec4<f32>, NV>;
    var sum = 0.0;
    var sq = 0.0;
    for (var i = 0u; i < NV; i++) {
        v[i] = load4(base, 4u * (i * WG + t), d, skip);
    }
    for (var i = 0u; i < NV; i++) {
        sum += dot(v[i], vec4<f32>(1.0));
        sq += dot(v[i], v[i]);
        let k = 4u * (i * WG + t);
        if skip && k < d {
            for (var j = 0u; j < 4u && k + j < d; j++) {
                s[base + k + j] = v[i][j];
            }
        }
    }
    for (var k = held + t; k < d; k += WG) {
        var u = x[base + k];
        if skip {
            u += r[base + k];
            s[base + k] = u;
        }
        sum += u;
        sq += u * u;
    }
    var mean = 0.0;
    if mode >= 2u {
        mean = reduce_sum(t, sum, lanes) / f32(max(d, 1u));
        sq = 0.0;
        for (var i = 0u; i < NV; i++) {
            let k = 4u * (i * WG + t);
            let c = select(vec4<f32>(), v[i] - vec4<f32>(mean), vec4<u32>(k) + vec4<u32>(0u, 1u, 2u, 3u) < vec4<u32>(d));
            sq += dot(c, c);
        }
        for (var k = held + t; k < d; k += WG) {
            let u = row_value(base + k, skip) - mean;
            sq += u * u;
        }
    }
    let inv = 1.0 / sqrt(reduce_sum(t, sq, lanes) / f32(max(d, 1u)) + eps);
    let int8 = (p.a.z & 8u) != 0u;
    let nan = bitcast<f32>(p.g.x);
    for (var i = 0u; i < NV; i++) {
        let k = 4u * (i * WG + t);
        let out = store4(base, k, d, v[i], mean, inv, mode);
        if int8 {
            // The blocks among the values held: by the eight threads holding each.
            q8_store_parts(k / 32u, t, out, k < d, nan);
        }
    }
    for (var k = held + t; k < d; k += WG) {
        store4(base, k, k + 1u, vec4<f32>(row_value(base + k, skip)), mean, inv, mode);
    }
    if int8 && d > held {
        // The blocks past those: read back, one thread per block.
        storageBarrier();
        for (var b = held / 32u + t; b < d / 32u; b += WG) {
            var q: array<f32, 32>;
            for (var i = 0u; i < 32u; i++) {
                q[i] = y[base + 32u * b + i];
            }
            q8_store(b, q, nan);
        }
    }
}

// Value i of the row: x + r when adding (the same sum this thread stored).
fn row_value(i: u32, skip: bool) -> f32 {
    if skip {
        return x[i] + r[i];
    }
    return x[i];
}
