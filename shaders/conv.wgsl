// Direct NCHW convolution: Conv2d, or ConvTranspose2d when b.w = 1 (Conv1d is
// a Conv2d of height 1). One invocation per output position and OC
// consecutive output channels of one group; neighbouring invocations share the
// channels and take neighbouring positions. Weights and bias are f32.
// a = (B, Cin, H, W), b = (Cout, Ho, Wo, transposed), c = (kh, kw, sh, sw),
// d = (dh, dw, pad top, pad left), e = (groups, has bias, _, _).
// Conv2d: w [Cout, Cin / G, kh, kw], y[n, o, i, j] = bias[o] + sum over the
// group's input channels c and taps (u, v) of x[n, c, i sh - pt + u dh,
// j sw - pl + v dw] w[o, c, u, v] (outside x reads 0).
// ConvTranspose2d: w [Cin, Cout / G, kh, kw], input row r reaches output row
// i through tap u when i + pt = r sh + u dh (likewise columns).
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> w: array<f32>;
@group(0) @binding(2) var<storage, read> bias: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

const OC: u32 = 4u;

// The input index along one axis that output `o` reads through tap `u`
// (`len` long, step `s`, dilation `d`, padding `pad`), or -1 when none.
fn source(o: u32, u: u32, len: u32, s: u32, d: u32, pad: u32, transposed: bool) -> i32 {
    if transposed {
        let t = i32(o + pad) - i32(u * d);
        if t < 0 || u32(t) % s != 0u || u32(t) / s >= len {
            return -1;
        }
        return i32(u32(t) / s);
    }
    let r = i32(o * s + u * d) - i32(pad);
    if r < 0 || u32(r) >= len {
        return -1;
    }
    return r;
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let idx = flat_index(gid);
    let batch = p.a.x;
    let cin = p.a.y;
    let h = p.a.z;
    let wd = p.a.w;
    let cout = p.b.x;
    let ho = p.b.y;
    let wo = p.b.z;
    let transposed = p.b.w == 1u;
    let kh = p.c.x;
    let kw = p.c.y;
    let groups = p.e.x;
    let per = cout / groups;
    let blocks = (per + OC - 1u) / OC;
    let plane = ho * wo;
    if idx >= batch * groups * blocks * plane {
        return;
    }
    let pix = idx % plane;
    let rest = idx / plane;
    let blk = rest % blocks;
    let g = (rest / blocks) % groups;
    let n = rest / (blocks * groups);
    let oi = pix / wo;
    let oj = pix % wo;
    let oo = blk * OC;
    let valid = min(OC, per - oo);
    let cg = cin / groups;
    let taps = kh * kw;
    // Weight offsets: of channel c of the group, and between output channels.
    var w0 = (g * per + oo) * cg * taps;
    var c_step = taps;
    var o_step = cg * taps;
    if transposed {
        w0 = (g * cg * per + oo) * taps;
        c_step = per * taps;
        o_step = taps;
    }
    var acc = vec4<f32>();
    for (var u = 0u; u < kh; u++) {
        let r = source(oi, u, h, p.c.z, p.d.x, p.d.z, transposed);
        if r < 0 {
            continue;
        }
        for (var v = 0u; v < kw; v++) {
            let s = source(oj, v, wd, p.c.w, p.d.y, p.d.w, transposed);
            if s < 0 {
                continue;
            }
            var xi = ((n * cin + g * cg) * h + u32(r)) * wd + u32(s);
            var wi = w0 + u * kw + v;
            for (var c = 0u; c < cg; c++) {
                let xv = x[xi];
                for (var k = 0u; k < OC; k++) {
                    acc[k] += xv * w[wi + min(k, valid - 1u) * o_step];
                }
                xi += h * wd;
                wi += c_step;
            }
        }
    }
    let o0 = g * per + oo;
    for (var k = 0u; k < valid; k++) {
        var b = 0.0;
        if p.e.y == 1u {
            b = bias[o0 + k];
        }
        y[((n * cout + o0 + k) * ho + oi) * wo + oj] = acc[k] + b;
    }
}
