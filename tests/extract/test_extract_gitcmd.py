import pandas as pd
import pytest

from pulse_ml.extract.gitcmd import git_flag_frame, git_flags, git_subcommands


@pytest.mark.parametrize("command,expected", [
    ("git push", {"push"}),
    ("cd repo && git push -u origin main", {"push"}),
    ("git -C /work/repo commit -m 'fix'", {"commit"}),
    ("git -c user.name=x -c user.email=y commit -am wip", {"commit"}),
    ("git --git-dir=.git --no-pager log; git pull --rebase", {"log", "pull"}),
    ("git add . && git commit -m 'git push later' || echo failed", {"add", "commit"}),
    ("git log --oneline | head -5 ; git reset --hard HEAD~1", {"log", "reset"}),
    ("sudo -u deploy git pull", {"pull"}),
    ("GIT_SSH_COMMAND='ssh -i k' git push", {"push"}),
    ("env -i FOO=1 git rebase -i main", {"rebase"}),
    ("export GITHUB_TOKEN=<token> && git push -u origin feature", {"push"}),
    ("timeout 30 git fetch && nohup git rebase origin/main", {"fetch", "rebase"}),
    ("bash -c 'cd repo && git commit -m x'", {"commit"}),
    ("(cd sub; git stash)", {"stash"}),
    ("ls\ngit push", {"push"}),
    ("/usr/bin/git status", {"status"}),
    ('echo "git push"', set()),
    ("echo 'run git commit and git push'", set()),
    ("grep -r 'git reset' docs/", set()),
    ('python -c "import os; os.system(\'x\')"  # git push', set()),
    ("cat .gitignore && ls .git", set()),
    ("git commit -m \"unbalanced", {"commit"}),
])
def test_git_subcommands(command, expected):
    assert set(git_subcommands(command)) == expected


def test_git_flags_and_vectorized_frame():
    assert git_flags(["git status", "git commit -m x", "echo git push"]) == {
        "git_commit": 1, "git_push": 0, "git_pull": 0, "git_reset": 0, "git_rebase": 0}
    ids = pd.Series(["a", "a", "b", "c", "c"])
    cmds = pd.Series(["git pull", "ls", "echo 'git push'", "git push", "git push"])
    frame = git_flag_frame(ids, cmds)
    assert frame.loc["a", "git_pull"] == 1 and frame.loc["a", "git_push"] == 0
    assert frame.loc["b"].sum() == 0 and frame.loc["c", "git_push"] == 1
    empty = git_flag_frame(pd.Series(["a"]), pd.Series(["ls"]))
    assert empty.empty and "git_push" in empty.columns
