; Inno Setup script for the Windows installer (Inno Setup 6).
;
; Built by `python packaging/build.py` on Windows, which passes the values below with /D; run by
; hand from the repository root after a build:
;   iscc /DAppVersion=0.1.0 /DSourceDir=dist\maka /DOutputDir=dist packaging\windows\maka.iss
;
; Installs per user by default (no administrator rights; the setup offers an all-users install),
; a Start menu entry for the windowed makaw.exe, an optional desktop icon and an optional PATH
; entry for the maka.exe command. Uninstalling removes the program and the PATH entry; the user's
; data folder (%LOCALAPPDATA%\maka: the ledger database) is kept on purpose.

#ifndef AppVersion
  #define AppVersion "0.0.0"
#endif
#ifndef AppNumericVersion
  #define AppNumericVersion "0.0.0.0"
#endif
#ifndef SourceDir
  #define SourceDir "..\..\dist\maka"
#endif
#ifndef OutputDir
  #define OutputDir "..\..\dist"
#endif
#ifndef IconFile
  #define IconFile "..\assets\maka.ico"
#endif

[Setup]
AppId={{6F2B8C1D-3E4A-4B5C-9D7E-8A1F2C3D4E5B}
AppName=Maka
AppVersion={#AppVersion}
AppVerName=Maka {#AppVersion}
AppPublisher=Maka
VersionInfoVersion={#AppNumericVersion}
DefaultDirName={autopf}\Maka
DefaultGroupName=Maka
DisableProgramGroupPage=yes
PrivilegesRequired=lowest
PrivilegesRequiredOverridesAllowed=dialog
ArchitecturesAllowed=x64compatible
ArchitecturesInstallIn64BitMode=x64compatible
OutputDir={#OutputDir}
OutputBaseFilename=Maka-{#AppVersion}-setup
SetupIconFile={#IconFile}
UninstallDisplayIcon={app}\makaw.exe
UninstallDisplayName=Maka {#AppVersion}
Compression=lzma2/max
SolidCompression=yes
WizardStyle=modern
ChangesEnvironment=yes
CloseApplications=yes

[Tasks]
Name: "desktopicon"; Description: "{cm:CreateDesktopIcon}"; GroupDescription: "{cm:AdditionalIcons}"; Flags: unchecked
Name: "addtopath"; Description: "Add the maka command to PATH"; GroupDescription: "Command line:"; Flags: unchecked

[Files]
Source: "{#SourceDir}\*"; DestDir: "{app}"; Flags: ignoreversion recursesubdirs createallsubdirs

[Icons]
Name: "{autoprograms}\Maka"; Filename: "{app}\makaw.exe"; WorkingDir: "{userdocs}"
Name: "{autodesktop}\Maka"; Filename: "{app}\makaw.exe"; WorkingDir: "{userdocs}"; Tasks: desktopicon

[Registry]
Root: HKA; Subkey: "{code:EnvironmentKey}"; ValueType: expandsz; ValueName: "Path"; ValueData: "{olddata};{app}"; Tasks: addtopath; Check: NeedsAddPath(ExpandConstant('{app}'))

[Run]
Filename: "{app}\makaw.exe"; Description: "{cm:LaunchProgram,Maka}"; Flags: nowait postinstall skipifsilent

[Code]
function EnvironmentRoot: Integer;
begin
  if IsAdminInstallMode then
    Result := HKEY_LOCAL_MACHINE
  else
    Result := HKEY_CURRENT_USER;
end;

function EnvironmentKey(Param: String): String;
begin
  if IsAdminInstallMode then
    Result := 'SYSTEM\CurrentControlSet\Control\Session Manager\Environment'
  else
    Result := 'Environment';
end;

function NeedsAddPath(Dir: String): Boolean;
var
  Paths: String;
begin
  if not RegQueryStringValue(EnvironmentRoot, EnvironmentKey(''), 'Path', Paths) then
  begin
    Result := True;
    exit;
  end;
  Result := Pos(';' + Uppercase(Dir) + ';', ';' + Uppercase(Paths) + ';') = 0;
end;

procedure CurUninstallStepChanged(CurUninstallStep: TUninstallStep);
var
  Paths, Entry: String;
  P: Integer;
begin
  if CurUninstallStep <> usUninstall then
    exit;
  if not RegQueryStringValue(EnvironmentRoot, EnvironmentKey(''), 'Path', Paths) then
    exit;
  Entry := ';' + ExpandConstant('{app}');
  P := Pos(Uppercase(Entry) + ';', Uppercase(Paths) + ';');
  if P > 0 then
  begin
    Delete(Paths, P, Length(Entry));
    RegWriteExpandStringValue(EnvironmentRoot, EnvironmentKey(''), 'Path', Paths);
  end;
end;
