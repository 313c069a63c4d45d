"""The two scripts the start-up tests run in a fresh interpreter: one command of the command
line, then the modules it had loaded; and a bare interpreter's modules, to subtract."""

COMMAND = (
    "import sys\n"
    "from aidememo_cli import main\n"
    "code = main(sys.argv[2:])\n"
    "with open(sys.argv[1], 'w') as out:\n"
    "    out.write('\\n'.join(sorted(sys.modules)))\n"
    "sys.exit(code)\n"
)
BARE = "import sys\nwith open(sys.argv[1], 'w') as out:\n    out.write('\\n'.join(sorted(sys.modules)))\n"
# The kit's top-level packages, whose modules the start-up tests account for.
KIT = ("refkit", "aidememo_wire", "aidememo_client", "aidememo_cli", "aidememo_ref", "xmemo_ref", "conformance",
       "simulations")
