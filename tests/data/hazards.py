"""Every fixable hazard of the static rules in one file (used by the end-to-end fix test)."""
import torch
import torch.nn as nn
from torch.cuda import synchronize as sync
from torch.cuda.amp import autocast

torch.set_default_tensor_type(torch.cuda.FloatTensor)
DEVICE = "cuda:0"


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        bias = torch.cuda.FloatTensor([0.5, 0.5])
        mask = torch.ones(2).cuda()
        return self.fc(x) * mask + bias


def train(model, batch, device="cuda"):
    model = model.cuda()
    batch = batch.to("cuda", non_blocking=True)
    scaler = torch.cuda.amp.GradScaler()
    with autocast():
        out = model(batch.type(torch.cuda.FloatTensor))
    sync()
    torch.cuda.synchronize()
    return out, scaler


def restore(path):
    state = torch.load(path)
    scripted = torch.jit.load(path + ".ts")
    return state, scripted, torch.cuda.LongTensor(3, 4), torch.device("cuda")
