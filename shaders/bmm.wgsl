// BatchMatmul of two f32 activations (src/backend/wgpu/products.rs):
// y[z, m, n] = sum_k xa[oa(z) + m K + k] xb[ob(z) + k N + n], each thread a 4 x 4
// block of output matrix z = gid.z, summed over k in order in registers (no
// workgroup memory: software adapters pay dearly for barriers). Reads past an
// edge are clamped to the last row / column and their sums not written.
// a = (M, N, K, blocks along N), b = output batch dims (4), c / d = batch
// strides of xa / xb (0 on broadcast dims), e.x = blocks per matrix.
@group(0) @binding(0) var<storage, read> xa: array<f32>;
@group(0) @binding(1) var<storage, read> xb: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let blk = flat_index(gid);
    if blk >= p.e.x {
        return;
    }
    let m_len = p.a.x;
    let n_len = p.a.y;
    let k_len = p.a.z;
    let r0 = (blk / p.a.w) * 4u;
    let c0 = (blk % p.a.w) * 4u;
    let z = gid.z;
    var rest = z;
    let b3 = rest % p.b.w;
    rest = rest / p.b.w;
    let b2 = rest % p.b.z;
    rest = rest / p.b.z;
    let b1 = rest % p.b.y;
    let b0 = rest / p.b.y;
    let oa = b0 * p.c.x + b1 * p.c.y + b2 * p.c.z + b3 * p.c.w;
    let ob = b0 * p.d.x + b1 * p.d.y + b2 * p.d.z + b3 * p.d.w;
    let cols = min(vec4<u32>(c0) + vec4<u32>(0u, 1u, 2u, 3u), vec4<u32>(n_len - 1u));
    let rows = min(vec4<u32>(r0) + vec4<u32>(0u, 1u, 2u, 3u), vec4<u32>(m_len - 1u));
    let ra = vec4<u32>(oa) + rows * k_len;
    var acc0 = vec4<f32>(0.0);
    var acc1 = vec4<f32>(0.0);
    var acc2 = vec4<f32>(0.0);
    var acc3 = vec4<f32>(0.0);
    for (var k = 0u; k < k_len; k++) {
        let rb = ob + k * n_len;
        let b = vec4<f32>(xb[rb + cols.x], xb[rb + cols.y], xb[rb + cols.z], xb[rb + cols.w]);
        acc0 += xa[ra.x + k] * b;
        acc1 += xa[ra.y + k] * b;
        acc2 += xa[ra.z + k] * b;
        acc3 += xa[ra.w + k] * b;
    }
    var acc = array<vec4<f32>, 4>(acc0, acc1, acc2, acc3);
    for (var i = 0u; i < 4u; i++) {
        let r = r0 + i;
        if r >= m_len {
            break;
        }
        for (var j = 0u; j < 4u; j++) {
            if c0 + j < n_len {
                y[(z * m_len + r) * n_len + c0 + j] = acc[i][j];
            }
        }
    }
}
