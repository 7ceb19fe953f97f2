"""The project model (``ast``) and TDV501 (LibCST) key a saved or loaded file by the same names:
a save another module makes matches a load only where both readers agree."""

import ast

import libcst as cst
import pytest

from torchdevice_lint.knowledge.file_names import file_names
from torchdevice_lint.rules.support.saved_files import path_keys

PATHS = {
    'os.path.join(args.dump, "feat.pth")': {"feat.pth"},
    'f"{epoch}.pkl"': {"{}.pkl"},
    "'%s_net_%s.pth' % (epoch, name)": {"{}_net_{}.pth"},
    "model_dir + '/' + model_name + 'stagelvl1_' + str(step) + '.pth'": {"{}stagelvl1_{}.pth", ".pth"},
    "sorted(glob.glob('../Model/Stage/' + model_name + 'stagelvl1_?????.pth'))[-1]": {"{}stagelvl1_{}.pth", "stagelvl1_{}.pth"},
    "out + f'/epoch_{epoch}.pt'": {"epoch_{}.pt"},
    "'ckpt_[0-9]*.pt'": {"ckpt_{}.pt"},
}


@pytest.mark.parametrize("code", sorted(PATHS))
def test_both_readers_name_the_same_files(code):
    from_ast = set(file_names(ast.parse(code, mode="eval").body))
    expression = cst.parse_expression(code)
    own_code = cst.Module([]).code_for_node(expression).replace(" ", "")
    from_cst = {key for key in path_keys(expression) if key != own_code and not key.endswith("()")}
    assert from_ast == PATHS[code]
    assert from_cst == PATHS[code]
