"""Recurrent layers (nn.LSTM, nn.GRU, nn.RNN) as compositions of aten ops, one time step
after another. torch runs each as ONE device-specific op (mkldnn_rnn_layer on CPU, cuDNN on
a GPU), so the same model would trace to different graphs on different devices; here every
step is linear, sigmoid/tanh, mul and add, each RepOps', in the cell formulas below (those
of the torch.nn documentation, in the association written), the same on every device.
repops.mode routes torch's _VF.lstm / gru / rnn_tanh / rnn_relu here."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .errors import UnsupportedOpError


def _lstm_cell(xw, h, c, w_hh, b_hh, w_hr):
    """gates = xw + (h W_hh^T + b_hh); i, f, g, o = chunks; c' = sigmoid(f) c + sigmoid(i) tanh(g);
    h' = sigmoid(o) tanh(c') (then h' W_hr^T with a projection). xw = x W_ih^T + b_ih."""
    i, f, g, o = (xw + F.linear(h, w_hh, b_hh)).chunk(4, -1)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    h = torch.sigmoid(o) * torch.tanh(c)
    return (h if w_hr is None else F.linear(h, w_hr)), c


def _gru_cell(xw, h, w_hh, b_hh):
    """r = sigmoid(xw_r + hw_r), z = sigmoid(xw_z + hw_z), n = tanh(xw_n + r hw_n);
    h' = n + z (h - n). hw = h W_hh^T + b_hh."""
    xr, xz, xn = xw.chunk(3, -1)
    hr, hz, hn = F.linear(h, w_hh, b_hh).chunk(3, -1)
    r, z = torch.sigmoid(xr + hr), torch.sigmoid(xz + hz)
    n = torch.tanh(xn + r * hn)
    return n + z * (h - n)


def _rnn_cell(act):
    def cell(xw, h, w_hh, b_hh):
        """h' = act(xw + (h W_hh^T + b_hh))."""
        return act(xw + F.linear(h, w_hh, b_hh))
    return cell


def _run(kind, x, hx, weights, has_bias, num_layers, dropout, training, bidirectional, batch_first):
    unbatched = x.dim() == 2
    if unbatched:
        x = x.unsqueeze(1)
        hx = [h.unsqueeze(1) for h in hx]
    elif batch_first:
        x = x.transpose(0, 1)
    dirs = 2 if bidirectional else 1
    per = len(weights) // (num_layers * dirs)
    h_out, c_out = [], []
    for layer in range(num_layers):
        outs = []
        for d in range(dirs):
            w = weights[(layer * dirs + d) * per:(layer * dirs + d + 1) * per]
            w_ih, w_hh = w[0], w[1]
            b_ih, b_hh = (w[2], w[3]) if has_bias else (None, None)
            w_hr = w[-1] if len(w) in (3, 5) else None  # an LSTM projection follows the (biases and) weights
            xw = F.linear(x, w_ih, b_ih)  # every time step's input projection at once
            h = hx[0][layer * dirs + d]
            c = hx[1][layer * dirs + d] if kind == "lstm" else None
            steps = range(x.shape[0] - 1, -1, -1) if d else range(x.shape[0])
            seq = [None] * x.shape[0]
            for t in steps:
                if kind == "lstm":
                    h, c = _lstm_cell(xw[t], h, c, w_hh, b_hh, w_hr)
                else:
                    h = CELLS[kind](xw[t], h, w_hh, b_hh)
                seq[t] = h
            outs.append(torch.stack(seq))
            h_out.append(h)
            c_out.append(c)
        x = outs[0] if dirs == 1 else torch.cat(outs, -1)
        if dropout and training and layer < num_layers - 1:  # torch's: each layer's output but the last
            from .random import dropout as portable_dropout
            x = portable_dropout(x, dropout, what=f"{kind}'s dropout between layers")
    out = x.squeeze(1) if unbatched else (x.transpose(0, 1) if batch_first else x)
    hs = [torch.stack(h_out)] + ([torch.stack(c_out)] if kind == "lstm" else [])
    if unbatched:
        hs = [h.squeeze(1) for h in hs]
    return (out, *hs)


CELLS = {"gru": _gru_cell, "rnn_tanh": _rnn_cell(torch.tanh), "rnn_relu": _rnn_cell(torch.relu)}


def recurrent(kind: str):
    """The handler of torch._VF.<kind>(input, hx, weights, bias, layers, dropout, train,
    bidirectional, batch_first); the packed form's second argument is the batch sizes (int64)."""
    def handler(*args):
        if isinstance(args[1], torch.Tensor) and not args[1].is_floating_point():
            raise UnsupportedOpError(f"{kind} over a PackedSequence: RepOps runs padded batches; pad the "
                                     "sequences (and mask the loss) instead of packing them")
        x, hx, weights, *rest = args
        hx = list(hx) if isinstance(hx, (list, tuple)) else [hx]
        return _run(kind, x, hx, list(weights), *rest)
    return handler
